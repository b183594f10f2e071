"""Plugins that misbehave, loaded into the daemon with ``DSH_PLUGINS=tests.containment.misbehaving_plugins:<name>``.

* ``throw_first`` / ``throw_last``: a ``session/event`` listener that raises on every ``user/message``,
  registered ahead of every other listener (so it runs before the ACP front end's and persistence's) or after.
* ``stubborn``: a tool ``stubborn`` that ignores its cancel token: it says it started (a line on the FIFO named by
  its ``fifo`` argument), then sleeps 60 s without ever looking at the token (task cancellation still ends it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
from pydantic import BaseModel

from dsh import events as ev
from dsh.kernel import plugin
from dsh.services.tools import ToolExecution, define_tool

if TYPE_CHECKING:
    from dsh.kernel import Context
    from dsh.services.sessions import Session, SessionEvent

__all__ = ["stubborn", "throw_first", "throw_last"]


def _thrower(session: Session, event: SessionEvent) -> None:
    if event.type == "user/message":
        raise RuntimeError("the misbehaving listener broke")


@plugin("throw-first")
def throw_first(ctx: Context, config: object) -> None:
    ctx.on(ev.SESSION_EVENT, _thrower, prepend=True)


@plugin("throw-last")
def throw_last(ctx: Context, config: object) -> None:
    ctx.on(ev.SESSION_EVENT, _thrower)


class StubbornArgs(BaseModel):
    fifo: str


async def _stubborn(args: StubbornArgs, execution: ToolExecution) -> str:
    async with await anyio.open_file(args.fifo, "w") as fifo:
        await fifo.write("started\n")
    await anyio.sleep(60)  # never looks at execution.signal
    return "finished"


@plugin("stubborn", inject=("tools",))
def stubborn(ctx: Context, config: object) -> None:
    ctx.tools.register(define_tool("stubborn", "Sleep for a minute, ignoring cancellation.", StubbornArgs, _stubborn))
