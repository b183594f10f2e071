"""The ``_dsh/agent/*`` stream (issue #16) on the client side: asking for it, checking its frames, waiting on it.

* :data:`ASK` is the ``clientCapabilities._meta`` that asks for the stream.
* :func:`check_agent_event` validates one notification frame against the documented schema
  (:data:`dsh.agent_stream.SCHEMA`): the method is ``_dsh/agent/<name>`` of a known event (or a plugin's, with
  ``args``), ``sessionId`` and ``agentId`` are strings, every documented field is there and nothing else.
* :class:`AgentEvents` records the stream as the SDK hands it over (its extension-notification hook,
  ``ext_notification``) and lets a test wait on it — above all :meth:`AgentEvents.wait_idle`, which waits for
  the agent to report ``_dsh/agent/status`` idle instead of sleeping or inferring it from prompt answers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio

from dsh.agent_stream import META_KEY, SCHEMA

__all__ = ["ASK", "PREFIX", "AgentEvents", "check_agent_event"]

ASK = {META_KEY: True}
PREFIX = "_dsh/agent/"


def check_agent_event(frame: dict[str, Any], where: str, problems: list[str]) -> None:
    """Append to *problems* everything wrong with the ``_dsh/agent/*`` notification *frame*."""
    method, params = frame["method"], frame.get("params")
    name = method[len("_dsh/") :]
    if not isinstance(params, dict):
        problems.append(f"{where}: {method} params are not an object")
        return
    if not isinstance(params.get("sessionId"), str) or not isinstance(params.get("agentId"), str):
        problems.append(f"{where}: {method} without sessionId / agentId strings: {params!r:.200}")
    fields = SCHEMA.get(name)
    if fields is None:  # a plugin's own event
        expected, optional = {"args"}, set()
        if not isinstance(params.get("args"), list):
            problems.append(f"{where}: plugin event {method} without an args list")
    else:
        expected = {key for key in fields if not key.endswith("?")}
        optional = {key[:-1] for key in fields if key.endswith("?")}
    keys = set(params) - {"sessionId", "agentId"}
    if not expected <= keys <= expected | optional:
        problems.append(f"{where}: {method} has fields {sorted(keys)}, the schema says {sorted(expected)}")


class AgentEvents:
    """The agent events a client received through the SDK's ``ext_notification`` hook, in arrival order."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, Any]]] = []
        """(method without the leading ``_``, as the SDK passes it: ``dsh/agent/status``; params)."""
        self._waiters: list[tuple[Callable[[], bool], anyio.Event]] = []

    def record(self, method: str, params: dict[str, Any]) -> None:
        self.received.append((method, params))
        for waiter in list(self._waiters):
            if waiter[0]():
                self._waiters.remove(waiter)
                waiter[1].set()

    def mark(self) -> int:
        """A position: the waits below only count events received after it."""
        return len(self.received)

    def of(self, session_id: str, after: int = 0) -> list[tuple[str, dict[str, Any]]]:
        return [(m, p) for m, p in self.received[after:] if p.get("sessionId") == session_id]

    async def wait(self, ready: Callable[[], bool]) -> None:
        if ready():
            return
        event = anyio.Event()
        self._waiters.append((ready, event))
        await event.wait()

    async def wait_for(self, session_id: str, name: str, after: int = 0, **fields: Any) -> dict[str, Any]:
        """The first ``_dsh/agent/<name>`` of *session_id* after *after* whose params include *fields*."""
        found: list[dict[str, Any]] = []

        def ready() -> bool:
            for method, params in self.of(session_id, after):
                if method == f"dsh/agent/{name}" and all(params.get(k) == v for k, v in fields.items()):
                    found.append(params)
                    return True
            return False

        await self.wait(ready)
        return found[0]

    async def wait_idle(self, session_id: str, after: int = 0) -> None:
        """Until the session's agent reported ``_dsh/agent/status`` idle after *after*: every frame of the turns
        before it was written (the status follows the turn's end on the one ordered writer)."""
        await self.wait_for(session_id, "status", after, status="idle")
