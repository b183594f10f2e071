"""Daemon-side test tools for sub-agents (``DSH_PLUGINS=tests.support.subagent_tools:plugin``).

* ``barrier(parties)``: returns once *parties* calls (from any session) are inside it at the same time, or fails
  after 10 s saying how many arrived: a result ``met 3`` proves the calls overlapped.
* ``block``: waits until its call is cancelled (the turn's cancel token), then reports it: a child that is
  still working when its parent is cancelled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
from pydantic import BaseModel

from dsh.errors import DshError
from dsh.kernel import plugin as dsh_plugin
from dsh.services.tools import ToolExecution, define_tool

if TYPE_CHECKING:
    from dsh.kernel import Context

__all__ = ["PLUGIN", "plugin"]

PLUGIN = "tests.support.subagent_tools:plugin"
_arrived: list[int] = [0]
_met = anyio.Event()


class BarrierArgs(BaseModel):
    parties: int


class BlockArgs(BaseModel):
    pass


async def barrier(args: BarrierArgs, execution: ToolExecution) -> str:
    _arrived[0] += 1
    if _arrived[0] >= args.parties:
        _met.set()
    with anyio.move_on_after(10):
        await _met.wait()
    if not _met.is_set():
        raise DshError(f"only {_arrived[0]} of {args.parties} calls arrived: no overlap", "NO_OVERLAP")
    return f"met {args.parties}"


async def block(args: BlockArgs, execution: ToolExecution) -> str:
    assert execution.signal is not None
    with anyio.fail_after(30):
        reason = await execution.signal.wait()
    return f"cancelled: {reason}"


@dsh_plugin("subagent_tools", inject=("tools",))
def plugin(ctx: Context, config: object) -> None:
    for tool in (
        define_tool("barrier", "Wait until parties calls are inside at once.", BarrierArgs, barrier),
        define_tool("block", "Wait until cancelled.", BlockArgs, block),
    ):
        ctx.tools.register(
            type(tool)(tool.name, tool.description, tool.parameters, tool.execute, meta={"kind": "read"})
        )
