"""The ACP front end: a plugin that maps ACP sessions onto agents, programmed against ``ctx.agents`` and the
event catalogue only (it never imports the loop package).

Mapping: ``session/new`` → ``ctx.agents.create`` (agent id = session id = a fresh uuid), ``session/prompt`` →
``agent.send``, ``session/cancel`` → ``agent.cancel``; session events are projected to ``session/update``.

Prompt settlement (every prompt is answered exactly once):

* Each prompt's message carries a ``message_id`` in its source. The ``user/message`` event with that id tells
  which turn consumed the prompt; that turn's ``turn/end`` answers it: completed → ``end_turn``, max-tokens →
  ``max_tokens``, aborted and disposed → ``cancelled``, error → -32603 ``turn failed: <message>``. A second
  prompt during a turn is queued (``agent.send``), not rejected.
* ``session/cancel`` cancels the agent's turn and queue; every pending prompt of the session is answered
  ``cancelled`` once the aborted turn's ``turn/end`` went out (after a final ``failed`` update for any tool call
  still open), or after a 2 s watchdog, or at once when no turn was open. An idle cancel does nothing.
* A fallback for work dropped behind our back (another plugin cancelling the agent): when the agent turns idle,
  prompts whose message was never consumed are answered ``cancelled``.

Updates of a turn always precede the prompt's answer: both go through the one ordered writer, and the answer
is produced after the ``turn/end`` event was projected.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from dsh import __version__
from dsh import events as ev
from dsh._log import get_logger
from dsh.events import TurnEndReason
from dsh.frontends.acp._content import prompt_content
from dsh.frontends.acp._dispatch import MethodTable, make_dispatch
from dsh.frontends.acp._projection import failed_update, project
from dsh.frontends.acp._rpc import INTERNAL_ERROR, INVALID_PARAMS, RESOURCE_NOT_FOUND, Connection, RpcError, dumps
from dsh.frontends.acp._wire import AuthenticateParams, CancelParams, InitializeParams, NewSessionParams, PromptParams
from dsh.kernel import plugin
from dsh.services.agents import Agent, AgentHandle, AgentOptions, AgentStatus

if TYPE_CHECKING:
    from dsh.kernel import Context
    from dsh.services.sessions import Session, SessionEvent

__all__ = ["AUTH_METHOD_ID", "AcpFrontend", "AcpOptions", "acp_plugin"]

AUTH_METHOD_ID = "dsh-local"
CANCEL_WATCHDOG = 2.0
log = get_logger("dsh.acp")


@dataclass(frozen=True)
class AcpOptions:
    """How the front end reaches the client and what new sessions run."""

    send_frame: Callable[[bytes], None]
    model: str = "echo"
    system_prompt: str | None = None


@dataclass(eq=False)
class _Prompt:
    message_id: str
    turn: int | None = None
    cancelled: bool = False
    settled: bool = False
    done: anyio.Event = field(default_factory=anyio.Event)
    outcome: dict[str, Any] | RpcError | None = None


@dataclass(eq=False)
class _AcpSession:
    id: str
    cwd: str
    handle: AgentHandle
    mcp_servers: list[dict[str, Any]]
    prompts: list[_Prompt] = field(default_factory=list)
    by_message: dict[str, _Prompt] = field(default_factory=dict)
    open_calls: dict[str, None] = field(default_factory=dict)
    current_turn: int | None = None
    turn_open: bool = False
    cancelling: int = 0
    """Generation of the pending cancel (0: none); the watchdog only acts on its own generation."""


def _stop_reason(reason: TurnEndReason) -> dict[str, Any] | RpcError:
    kind = reason.get("kind")
    if kind == "error":
        return RpcError(INTERNAL_ERROR, f"turn failed: {reason.get('message', 'unknown error')}")
    if kind == "max-tokens":
        return {"stopReason": "max_tokens"}
    if kind in ("aborted", "disposed"):
        return {"stopReason": "cancelled"}
    return {"stopReason": "end_turn"}


class AcpFrontend:
    def __init__(self, ctx: Context, options: AcpOptions) -> None:
        self._ctx = ctx
        self._options = options
        self._send = options.send_frame
        self._sessions: dict[str, _AcpSession] = {}
        self._generations = 0
        self._closing = False
        self.client_capabilities: dict[str, Any] = {}
        self.connection = Connection(options.send_frame, make_dispatch(self._methods()))

    def _methods(self) -> MethodTable:
        return {
            "initialize": (InitializeParams, self.initialize),
            "authenticate": (AuthenticateParams, self.authenticate),
            "session/new": (NewSessionParams, self.new_session),
            "session/prompt": (PromptParams, self.prompt),
            "session/cancel": (CancelParams, self.cancel),
        }

    # -- methods ----------------------------------------------------------------------------------------

    async def initialize(self, params: InitializeParams) -> dict[str, Any]:
        self.client_capabilities = params.client_capabilities
        return {
            "protocolVersion": min(params.protocol_version, 1),
            "agentCapabilities": {
                "loadSession": False,
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
                "mcpCapabilities": {"http": False, "sse": False},
                "sessionCapabilities": {},
            },
            "authMethods": [
                {
                    "id": AUTH_METHOD_ID,
                    "name": "No sign-in needed",
                    "description": "dsh uses local or configured models; there is nothing to sign in to.",
                }
            ],
            "agentInfo": {"name": "dsh", "title": "dsh", "version": __version__},
        }

    async def authenticate(self, params: AuthenticateParams) -> dict[str, Any]:
        if params.method_id != AUTH_METHOD_ID:
            raise RpcError(
                INVALID_PARAMS, f"unknown authentication method {params.method_id!r}; use {AUTH_METHOD_ID!r}"
            )
        return {}

    async def new_session(self, params: NewSessionParams) -> dict[str, Any]:
        self._check_open()
        if not os.path.isabs(params.cwd):
            raise RpcError(INVALID_PARAMS, f"cwd must be an absolute path, got {params.cwd!r}", {"field": "cwd"})
        session_id = str(uuid.uuid4())
        handle = await self._ctx.agents.create(
            agent_id=session_id,
            session_id=session_id,
            meta={"cwd": params.cwd},
            agent_options=AgentOptions(model=self._options.model, system_prompt=self._options.system_prompt),
        )
        self._sessions[session_id] = _AcpSession(session_id, params.cwd, handle, list(params.mcp_servers))
        log.info("session created", session_id=session_id, cwd=params.cwd, mcp_servers=len(params.mcp_servers))
        return {"sessionId": session_id}

    async def prompt(self, params: PromptParams) -> dict[str, Any]:
        record = self._session(params.session_id)
        content = prompt_content(params.prompt, accept_images=False)
        pending = _Prompt(message_id=str(uuid.uuid4()))
        record.prompts.append(pending)
        record.by_message[pending.message_id] = pending
        try:
            record.handle.agent.send(content, {"kind": "user", "message_id": pending.message_id})
        except Exception:
            self._forget(record, pending)
            raise
        try:
            await pending.done.wait()
        finally:
            if not pending.settled:  # the request itself was cancelled ($/cancel_request, shutdown)
                pending.settled = True
                self._forget(record, pending)
        outcome = pending.outcome
        if isinstance(outcome, RpcError):
            raise outcome
        assert outcome is not None
        return outcome

    async def cancel(self, params: CancelParams) -> None:
        record = self._sessions.get(params.session_id)
        if record is None:
            return
        pending = [p for p in record.prompts if not p.settled]
        agent = record.handle.agent
        if not pending and agent.status != "running":
            return  # an idle cancel changes nothing
        agent.cancel("session/cancel")
        for prompt in pending:
            prompt.cancelled = True
        if record.turn_open:
            self._generations += 1
            record.cancelling = self._generations
            self._ctx.spawn(self._watchdog, record, record.cancelling, name=f"acp-cancel-watchdog:{record.id}")
        else:
            self._settle_cancelled(record)

    # -- events -----------------------------------------------------------------------------------------

    def on_session_event(self, session: Session, event: SessionEvent) -> None:
        record = self._sessions.get(session.id)
        if record is None:
            return
        for update in project(event):
            self._send(
                dumps(
                    {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": record.id, "update": update}}
                )
            )
        kind = event.type
        if kind == "assistant/chunk":
            return
        data = event.data
        if kind == "turn/start":
            record.current_turn = data["turn"]
            record.turn_open = True
        elif kind == "user/message":
            source = data.get("source") or {}
            prompt = record.by_message.get(source.get("message_id", "")) if isinstance(source, dict) else None
            if prompt is not None:
                prompt.turn = record.current_turn
        elif kind == "tool/call":
            record.open_calls[data["call_id"]] = None
        elif kind == "tool/result":
            record.open_calls.pop(data["call_id"], None)
        elif kind == "turn/end":
            record.turn_open = False
            self._turn_ended(record, data["turn"], data["reason"])

    def on_agent_status(self, agent: Agent, status: AgentStatus) -> None:
        record = self._sessions.get(agent.session.id)
        if record is None or status == "running":
            return
        for prompt in list(record.prompts):
            if prompt.turn is None and not prompt.settled:
                self._settle(record, prompt, {"stopReason": "cancelled"})

    # -- settlement -------------------------------------------------------------------------------------

    def _turn_ended(self, record: _AcpSession, turn: int, reason: TurnEndReason) -> None:
        if record.cancelling:
            self._settle_cancelled(record)
        outcome = _stop_reason(reason)
        for prompt in list(record.prompts):
            if prompt.turn == turn:
                self._settle(record, prompt, outcome)

    def _settle_cancelled(self, record: _AcpSession) -> None:
        record.cancelling = 0
        for call_id in list(record.open_calls):
            update = failed_update(call_id, "Cancelled by the user.")
            self._send(
                dumps(
                    {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": record.id, "update": update}}
                )
            )
        record.open_calls.clear()
        for prompt in list(record.prompts):
            if prompt.cancelled:
                self._settle(record, prompt, {"stopReason": "cancelled"})

    def _settle(self, record: _AcpSession, prompt: _Prompt, outcome: dict[str, Any] | RpcError) -> None:
        if prompt.settled:
            return
        prompt.settled = True
        prompt.outcome = outcome
        self._forget(record, prompt)
        prompt.done.set()

    def _forget(self, record: _AcpSession, prompt: _Prompt) -> None:
        if prompt in record.prompts:
            record.prompts.remove(prompt)
        record.by_message.pop(prompt.message_id, None)

    async def _watchdog(self, record: _AcpSession, generation: int) -> None:
        await anyio.sleep(CANCEL_WATCHDOG)
        if record.cancelling == generation:
            log.warning("cancelled turn did not end in time; answering its prompts", session_id=record.id)
            self._settle_cancelled(record)

    # -- lifecycle --------------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closing:
            raise RpcError(INTERNAL_ERROR, "dsh is shutting down")

    def _session(self, session_id: str) -> _AcpSession:
        self._check_open()
        record = self._sessions.get(session_id)
        if record is None:
            raise RpcError(RESOURCE_NOT_FOUND, f"unknown session {session_id!r}", {"sessionId": session_id})
        return record

    async def shutdown(self) -> None:
        """Cancel every turn, answer every pending prompt ``cancelled``, dispose every agent (each closing
        ``turn/end`` is flushed while its session is still attached)."""
        self._closing = True
        records = list(self._sessions.values())
        for record in records:
            record.handle.agent.cancel("shutdown")
            for prompt in record.prompts:
                prompt.cancelled = True
            self._settle_cancelled(record)
        async with anyio.create_task_group() as group:
            for record in records:
                group.start_soon(record.handle.dispose)
        self._sessions.clear()


@plugin("acp", inject=("agents", "sessions"))
def acp_plugin(ctx: Context, options: AcpOptions) -> None:
    frontend = AcpFrontend(ctx, options)
    ctx.on(ev.SESSION_EVENT, frontend.on_session_event)
    ctx.on(ev.AGENT_STATUS, frontend.on_agent_status)
    ctx.provide("acp", frontend)
