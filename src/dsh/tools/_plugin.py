"""The plugin that loads the built-in tools; declared apart so that ``import dsh.tools`` stays light.

Start-up registers the tools from :mod:`dsh.tools._catalogue` (plain data: names, kinds, descriptions, argument
schemas) and provides the ``workspace`` service; the tool bodies, pydantic argument models included, are
imported the first time any tool is called, presented or checked. The registered definitions behave exactly
like the real ones (a test compares them), they only load late.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dsh import events as ev
from dsh.kernel import plugin

if TYPE_CHECKING:
    from dsh.kernel import Context, Next
    from dsh.services.tools import ToolDefinition, ToolExecution, ToolResult
    from dsh.tools._workspace import Workspace

__all__ = ["PREPARED", "builtin_tools_plugin"]

PREPARED = frozenset({"write_file", "edit_file", "run_command"})
"""The built-in tools with a prepare stage (a test checks this against the real definitions)."""


class _LazyTools:
    """The real tool definitions, built on first use over the plugin's workspace."""

    def __init__(self, workspace: Workspace) -> None:
        self._workspace = workspace
        self._real: dict[str, ToolDefinition] | None = None

    def get(self, name: str) -> ToolDefinition:
        if self._real is None:
            from dsh.tools._builtin import build_tools

            self._real = {tool.name: tool for tool in build_tools(self._workspace)}
        return self._real[name]

    def execute(self, name: str) -> Any:
        async def execute(arguments: Any, execution: ToolExecution) -> Any:
            return await self.get(name).execute(arguments, execution)

        return execute

    def prepare(self, name: str) -> Any:
        async def prepare(arguments: Any, execution: ToolExecution) -> Any:
            real = self.get(name).prepare
            assert real is not None
            return await real(arguments, execution)

        return prepare

    def meta(self, name: str, key: str) -> Any:
        def call(arguments: Any, cwd: str) -> Any:
            return self.get(name).meta[key](arguments, cwd)

        return call


async def _finish(execution: ToolExecution, next_: Next[ToolExecution, ToolResult]) -> ToolResult:
    from dsh.tools._builtin import finish_call

    return await finish_call(execution, next_)


@plugin("builtin_tools", inject=("tools",))
def builtin_tools_plugin(ctx: Context, config: object) -> None:
    """Provide the ``workspace`` service and register read_file, write_file, edit_file, list_files, grep and
    run_command (see :mod:`dsh.tools`). Everything is owned by this plugin's scope: disposing it withdraws the
    service and removes the tools."""
    from dsh.services.tools import ToolDefinition
    from dsh.tools._catalogue import CATALOGUE
    from dsh.tools._workspace import Workspace

    workspace = Workspace(ctx)
    ctx.provide("workspace", workspace)
    ctx.on(ev.TOOLS_EXECUTE, _finish)
    lazy = _LazyTools(workspace)
    for spec in CATALOGUE:
        meta = {"kind": spec.kind, "present": lazy.meta(spec.name, "present"), "paths": lazy.meta(spec.name, "paths")}
        prepare = lazy.prepare(spec.name) if spec.name in PREPARED else None
        ctx.tools.register(
            ToolDefinition(
                spec.name, spec.description, spec.parameters, lazy.execute(spec.name), meta=meta, prepare=prepare
            )
        )
