"""The plugin that loads the built-in tools; declared apart so that ``import dsh.tools`` stays light (the tool
bodies, pydantic models included, are imported when the plugin applies)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh.kernel import plugin

if TYPE_CHECKING:
    from dsh.kernel import Context

__all__ = ["builtin_tools_plugin"]


@plugin("builtin_tools", inject=("tools",))
def builtin_tools_plugin(ctx: Context, config: object) -> None:
    """Provide the ``workspace`` service and register read_file, write_file, edit_file, list_files, grep and
    run_command (see :mod:`dsh.tools`). Everything is owned by this plugin's scope: disposing it withdraws the
    service and removes the tools."""
    from dsh.tools._builtin import install

    install(ctx)
