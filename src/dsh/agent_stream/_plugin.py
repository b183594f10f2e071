"""The ``agent_stream`` plugin: the loop's ``agent/*`` events as ACP extension notifications, for clients that ask.

Guarantees:

* **Off by default, and free when off.** The stream is on when the daemon was started with it
  (``--agent-events`` / ``DSH_AGENT_EVENTS=1``: the plugin's ``forced``) or when a client's ``initialize`` has
  ``clientCapabilities._meta["dsh.dev/agentEvents"] == true``. Until then this plugin has no listener on any
  event (the chunk path does not even see it); the ``initialize`` answer says
  ``agentCapabilities._meta["dsh.dev/agentEvents"] = true`` exactly when it is on. A client that did not ask
  never gets a ``_dsh/*`` frame.
* **Loop order, one writer.** Each event becomes one notification sent synchronously from its listener through
  the front end's ``notify`` (the same ordered writer as ``session/update``): frames appear in the order the loop
  emitted the events, interleaved with the session's updates as the loop interleaved its session events with
  them. Hence ``_dsh/agent/turn-end`` comes after that turn's last ``session/update`` and before the prompt's
  answer (the answer is written by the prompt's task, which can only run after the listener returned).
  ``_dsh/agent/status`` idle follows the turn's session flush, so it may come before or after that answer.
* **Every session-related event**: the catalogue's ``agent/*`` emit events (see :data:`SCHEMA`), the
  ``tool/call`` / ``tool/result`` session events, and any plugin's own ``agent/<name>`` emit event declared
  (its module imported) before the stream went on whose first argument is the agent, carried as
  ``{sessionId, agentId, args}`` when the remaining arguments are JSON (otherwise skipped, logged at debug).
* A listener never raises into the loop: an encoding problem is logged and the event skipped.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from dsh import events as ev
from dsh._log import get_logger
from dsh.agent_stream._wire import ENCODERS, METHOD_PREFIX, SESSION_EVENT_FORMS, session_event_params
from dsh.kernel import EmitEvent, EventSpec, plugin

if TYPE_CHECKING:
    from collections.abc import Callable

    from dsh.kernel import Context
    from dsh.services.agents import Agent
    from dsh.services.sessions import Session, SessionEvent

__all__ = ["META_KEY", "AgentStream", "agent_stream_plugin"]

META_KEY = "dsh.dev/agentEvents"
"""The ``_meta`` key a client sets to ``true`` in ``clientCapabilities`` to ask for the stream, and that the
``initialize`` answer sets in ``agentCapabilities`` when it is on."""
log = get_logger("dsh.acp.agent_stream")


class AgentStream:
    """The stream's state: whether it is on, and the notification sender (``notify(method, params)``)."""

    def __init__(self, ctx: Context, notify: Callable[[str, dict[str, Any]], None], *, forced: bool) -> None:
        self._ctx = ctx
        self._notify = notify
        self._agents: dict[str, str] = {}
        """session id → agent id (for the session events, which name no agent)."""
        self.on = False
        if forced:
            self.start()

    def capabilities(self, client_capabilities: dict[str, Any]) -> dict[str, Any]:
        """The ``initialize`` hook: turn the stream on when the client asks; the ``_meta`` entries to answer."""
        meta = client_capabilities.get("_meta")
        if isinstance(meta, dict) and meta.get(META_KEY) is True:
            self.start()
        return {META_KEY: True} if self.on else {}

    def start(self) -> None:
        """Listen to every carried event (idempotent): from now on each becomes a notification."""
        if self.on:
            return
        self.on = True
        ctx = self._ctx
        known = {spec.name for spec in ev.ALL}
        for name in ENCODERS:
            ctx.effect(ctx.app.bus.add(name, self._listener(name)))
        ctx.on(ev.SESSION_EVENT, self._on_session_event)
        for spec in EventSpec.declared():
            if isinstance(spec, EmitEvent) and spec.name.startswith("agent/") and spec.name not in known:
                ctx.effect(ctx.app.bus.add(spec.name, self._plugin_listener(spec.name)))
                known.add(spec.name)

    def _send(self, name: str, params: dict[str, Any]) -> None:
        try:
            self._notify(METHOD_PREFIX + name, params)
        except Exception:  # a value JSON cannot carry (NaN), a writer that is gone: never the loop's problem
            log.exception("cannot send an agent event", agent_event=name)

    def _in_policy(self, encode: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
        """*encode* run under this application's secret policy (an error's message is redacted with it)."""

        def encoded(*args: Any) -> dict[str, Any]:
            from dsh.secrets import policy_in_force

            with policy_in_force(self._ctx.get("secret_policy")):
                return encode(*args)

        return encoded

    def _listener(self, name: str) -> Callable[..., None]:
        encode = self._in_policy(ENCODERS[name]) if name == "agent/error" else ENCODERS[name]

        def listener(agent: Agent, *args: Any) -> None:
            try:
                self._agents[agent.session.id] = agent.id
                params = encode(agent, *args)
            except Exception:
                log.exception("cannot encode an agent event", agent_event=name)
                return
            self._send(name, params)
            if name == "agent/disposed":
                self._agents.pop(agent.session.id, None)

        return listener

    def _plugin_listener(self, name: str) -> Callable[..., None]:
        def listener(agent: Any, *args: Any) -> None:
            session = getattr(agent, "session", None)
            session_id, agent_id = getattr(session, "id", None), getattr(agent, "id", None)
            if not isinstance(session_id, str) or not isinstance(agent_id, str):
                return
            try:
                json.dumps(args, allow_nan=False)
            except (TypeError, ValueError):
                log.debug("plugin agent event is not JSON; not sent", agent_event=name)
                return
            self._send(name, {"sessionId": session_id, "agentId": agent_id, "args": list(args)})

        return listener

    def _on_session_event(self, session: Session, event: SessionEvent) -> None:
        name = SESSION_EVENT_FORMS.get(event.type)
        if name is None:
            return
        try:
            params = session_event_params(session.id, self._agents.get(session.id, session.id), event)
        except Exception:
            log.exception("cannot encode a session event", session_event=event.type)
            return
        self._send(name, params)


@plugin("agent_stream", inject=("acp",))
def agent_stream_plugin(ctx: Context, config: dict[str, Any] | None) -> None:
    """*config*: ``{"forced": bool}`` (``--agent-events`` / ``DSH_AGENT_EVENTS``)."""
    frontend = ctx.acp
    stream = AgentStream(ctx, frontend.notify, forced=bool((config or {}).get("forced")))
    ctx.effect(frontend.add_capability_hook(stream.capabilities))
