"""A daemon-side test tool, ``bulk``: returns ``size`` characters of deterministic text (``DSH_PLUGINS=
tests.support.bulk_tool:plugin``; the repository root is on a sandboxed daemon's ``PYTHONPATH``). Long-turn tests
use it to give every step a tool result of a known size, independent of the built-in tools' output budgets."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel

from dsh.kernel import plugin as dsh_plugin
from dsh.services.tools import ToolExecution, define_tool

if TYPE_CHECKING:
    from dsh.kernel import Context

__all__ = ["PLUGIN", "bulk_text", "plugin"]

PLUGIN = "tests.support.bulk_tool:plugin"


class BulkArgs(BaseModel):
    """How much output, and a label that makes each call's output different."""

    size: int
    label: str = ""


def bulk_text(size: int, label: str) -> str:
    """*size* characters: words carrying *label*, repeated."""
    unit = f"{label} lorem ipsum dolor sit amet consectetur "
    return (unit * (size // len(unit) + 1))[:size]


async def bulk(args: BulkArgs, execution: ToolExecution) -> str:
    return bulk_text(args.size, args.label)


@dsh_plugin("bulk_tool", inject=("tools",))
def plugin(ctx: Context, config: object) -> None:
    ctx.tools.register(define_tool("bulk", "Return size characters of text.", BulkArgs, bulk))
