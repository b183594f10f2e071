"""A test tool for the daemon end-to-end test: loaded with ``DSH_PLUGINS=e2e_shout_plugin:plugin`` and
``PYTHONPATH`` pointing at this directory. Self-contained: it imports nothing from the test package."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel

from dsh.kernel import plugin as dsh_plugin
from dsh.services.tools import ToolExecution, define_tool

if TYPE_CHECKING:
    from dsh.kernel import Context

__all__ = ["plugin"]


class ShoutArgs(BaseModel):
    """What to shout."""

    text: str


async def shout(args: ShoutArgs, execution: ToolExecution) -> str:
    return args.text.upper()


@dsh_plugin("e2e_shout", inject=("tools",))
def plugin(ctx: Context, config: object) -> None:
    ctx.tools.register(define_tool("shout", "Shout the text back in capitals.", ShoutArgs, shout))
