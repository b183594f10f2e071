"""The wire forms of the ``agent/*`` events: one ACP extension notification per event, and the schema list.

Every notification's method is ``_dsh/agent/<name>`` (ACP reserves a leading ``_`` for extensions) and its
params are one JSON object with ``sessionId`` and ``agentId`` first, then the fields below (camelCase, as ACP
spells its own). :data:`SCHEMA` is the documentation and is kept in step with the catalogue of
:mod:`dsh.events` by a test: an ``agent/*`` event without a wire form (or a reason it has none), or a wire form
without an event, fails it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dsh.errors import error_code, error_message

if TYPE_CHECKING:
    from dsh.events import QueuedInfo, TurnEndReason
    from dsh.services.agents import Agent, AgentStatus
    from dsh.services.llm import ContentBlock, MessageSource, StreamChunk
    from dsh.services.sessions import SessionEvent

__all__ = ["METHOD_PREFIX", "NOT_CARRIED", "SCHEMA", "SESSION_EVENT_FORMS", "params_of"]

METHOD_PREFIX = "_dsh/"
"""``_dsh/agent/turn-end`` carries ``agent/turn-end``: the prefix plus the event's name."""

SCHEMA: dict[str, dict[str, str]] = {
    "agent/created": {},
    "agent/disposed": {},
    "agent/status": {"status": '"idle" | "running" | "disposed"'},
    "agent/queued": {"content": "ContentBlock[] (the message)", "source": "MessageSource", "steering": "bool"},
    "agent/turn-start": {"turn": "int"},
    "agent/turn-end": {
        "turn": "int",
        "reason": '{kind: "completed" | "aborted" | "error" | "disposed" | "max-tokens" | "interrupted", '
        "reason?: str (aborted), message?: str, code?: str (error)}",
    },
    "agent/step-start": {"turn": "int", "step": "int"},
    "agent/step-end": {"turn": "int", "step": "int"},
    "agent/stream-chunk": {"turn": "int", "step": "int", "chunk": "StreamChunk (text-delta, reasoning-delta, …)"},
    "agent/steering": {"turn": "int", "content": "ContentBlock[]", "source": "MessageSource"},
    "agent/error": {
        "turn": "int (0: before the turn opened)",
        "step": "int",
        "error": "{message: str, code?: str} (never a traceback; secret values redacted)",
    },
    "agent/tool-call": {"turn": "int", "step": "int", "callId": "str", "name": "str", "arguments": "str (JSON text)"},
    "agent/tool-result": {
        "turn": "int",
        "step": "int",
        "callId": "str",
        "isError": "bool",
        "content": "ContentBlock[] (what the model is given)",
        "error?": "{name, code}",
    },
}
"""Wire name (after ``_dsh/``) → fields beyond ``sessionId`` and ``agentId``. A plugin's own ``agent/<name>``
emit event becomes ``_dsh/agent/<name>`` with ``{sessionId, agentId, args: [the remaining arguments]}`` when
they are JSON (see :mod:`dsh.agent_stream`)."""

NOT_CARRIED: dict[str, str] = {
    "agent/request": "a waterfall (rewrites the request before a step), not an announcement",
    "agent/compact": "a waterfall (does agent.compact() between turns); its outcome is the turn/start of trigger "
    "compaction and the context/compaction session event",
    "agent/step-result": "a waterfall (rewrites the step's message); its tool calls come as agent/tool-call",
    "agent/turn-continuation": "a waterfall (decides whether the turn goes on); its outcome is the next step-start "
    "or the turn-end",
}
"""``agent/*`` events of the catalogue that have no wire form, and why."""

SESSION_EVENT_FORMS = {"tool/call": "agent/tool-call", "tool/result": "agent/tool-result"}
"""Session events (not in the ``agent/*`` catalogue: the loop logs them) carried as agent events."""


def _ids(agent: Agent) -> dict[str, Any]:
    return {"sessionId": agent.session.id, "agentId": agent.id}


def _none(agent: Agent) -> dict[str, Any]:
    return _ids(agent)


def _status(agent: Agent, status: AgentStatus) -> dict[str, Any]:
    return {**_ids(agent), "status": status}


def _queued(agent: Agent, content: list[ContentBlock], info: QueuedInfo) -> dict[str, Any]:
    return {**_ids(agent), "content": content, "source": info["source"], "steering": info["steering"]}


def _turn(agent: Agent, turn: int) -> dict[str, Any]:
    return {**_ids(agent), "turn": turn}


def _turn_end(agent: Agent, turn: int, reason: TurnEndReason) -> dict[str, Any]:
    return {**_ids(agent), "turn": turn, "reason": dict(reason)}


def _step(agent: Agent, turn: int, step: int) -> dict[str, Any]:
    return {**_ids(agent), "turn": turn, "step": step}


def _chunk(agent: Agent, turn: int, step: int, chunk: StreamChunk) -> dict[str, Any]:
    return {**_ids(agent), "turn": turn, "step": step, "chunk": chunk}


def _steering(agent: Agent, turn: int, content: list[ContentBlock], source: MessageSource) -> dict[str, Any]:
    return {**_ids(agent), "turn": turn, "content": content, "source": source}


def _error(agent: Agent, turn: int, step: int, error: BaseException) -> dict[str, Any]:
    from dsh.secrets import redact_text

    described: dict[str, Any] = {"message": redact_text(error_message(error))}
    code = error_code(error)
    if code is not None:
        described["code"] = code
    return {**_ids(agent), "turn": turn, "step": step, "error": described}


ENCODERS: dict[str, Callable[..., dict[str, Any]]] = {
    "agent/created": _none,
    "agent/disposed": _none,
    "agent/status": _status,
    "agent/queued": _queued,
    "agent/turn-start": _turn,
    "agent/turn-end": _turn_end,
    "agent/step-start": _step,
    "agent/step-end": _step,
    "agent/stream-chunk": _chunk,
    "agent/steering": _steering,
    "agent/error": _error,
}
"""The catalogue's ``agent/*`` emit events → params (listener arguments in, JSON object out)."""


def params_of(name: str, *args: Any) -> dict[str, Any]:
    """The params of ``_dsh/<name>`` for the listener arguments *args* of the catalogue event *name*."""
    return ENCODERS[name](*args)


def session_event_params(session_id: str, agent_id: str, event: SessionEvent) -> dict[str, Any]:
    """The params of the agent event carrying the session event *event* (``tool/call`` or ``tool/result``)."""
    data = event.data
    params: dict[str, Any] = {
        "sessionId": session_id,
        "agentId": agent_id,
        "turn": data["turn"],
        "step": data["step"],
        "callId": data["call_id"],
    }
    if event.type == "tool/call":
        params["name"] = data["name"]
        params["arguments"] = data["arguments"]
    else:
        params["isError"] = bool(data.get("is_error"))
        params["content"] = data.get("content", [])
        if data.get("error") is not None:
            params["error"] = data["error"]
    return params
