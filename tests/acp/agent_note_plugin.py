"""A plugin with its own ``agent/*`` events, for the ``_dsh/agent/*`` stream tests (loaded with
``DSH_PLUGINS=tests.acp.agent_note_plugin:plugin``): on every turn start it emits ``agent/note`` with JSON
arguments (carried as ``_dsh/agent/note``) and ``agent/opaque`` with an argument that is not JSON (not carried)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh import events as ev
from dsh.kernel import EmitEvent
from dsh.kernel import plugin as dsh_plugin

if TYPE_CHECKING:
    from dsh.kernel import Context
    from dsh.services.agents import Agent

__all__ = ["AGENT_NOTE", "AGENT_OPAQUE", "plugin"]

AGENT_NOTE: EmitEvent[[Agent, int, dict[str, object]]] = EmitEvent("agent/note")
AGENT_OPAQUE: EmitEvent[[Agent, object]] = EmitEvent("agent/opaque")


@dsh_plugin("agent_note")
def plugin(ctx: Context, config: object) -> None:
    def on_turn_start(agent: Agent, turn: int) -> None:
        ctx.emit(AGENT_NOTE, agent, turn, {"note": f"turn {turn} started", "tags": ["a", 1, None]})
        ctx.emit(AGENT_OPAQUE, agent, object())

    ctx.on(ev.AGENT_TURN_START, on_turn_start)
