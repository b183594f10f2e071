"""A test plugin (``DSH_PLUGINS=tests.beyond_turn.hold_plugin:plugin``) that holds the durability checkpoint of the
first turn that decided to end, between the loop's last look at the steering FIFO and the turn's ``turn/end``: it
writes to the FIFO ``$DSH_TEST_HOLDING`` (the test learns the turn is held there), then reads the FIFO
``$DSH_TEST_GATE`` until the test closes it. A steer sent in that window is one the turn can no longer take."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import anyio.to_thread

from dsh import events as ev
from dsh.kernel import plugin as dsh_plugin

if TYPE_CHECKING:
    from dsh.kernel import Context, Next
    from dsh.services.agents import Agent
    from dsh.services.sessions import Session

__all__ = ["plugin"]


def _hold(holding: str, gate: str) -> None:
    with open(holding, "w") as signal:
        signal.write("held\n")
    with open(gate) as wait:
        wait.read()


@dsh_plugin("hold_flush")
def plugin(ctx: Context, config: object) -> None:
    holding, gate = os.environ["DSH_TEST_HOLDING"], os.environ["DSH_TEST_GATE"]
    state = {"ending": False, "held": False}

    async def decide(agent: Agent, turn: int, default: bool, next_: Next[bool, bool]) -> bool:
        decision = await next_(default)
        if not decision:
            state["ending"] = True
        return decision

    async def flush(session: Session) -> None:
        if state["ending"] and not state["held"]:
            state["held"] = True
            await anyio.to_thread.run_sync(_hold, holding, gate)

    ctx.on(ev.AGENT_TURN_CONTINUATION, decide)
    ctx.on(ev.SESSION_FLUSH, flush)
