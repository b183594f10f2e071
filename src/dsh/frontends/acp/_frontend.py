"""The ACP front end: a plugin that maps ACP sessions onto agents, programmed against ``ctx.agents`` and the
event catalogue only (it never imports the loop package).

Mapping: ``session/new`` → ``ctx.agents.create`` (agent id = session id = a fresh uuid), ``session/prompt`` →
``agent.send``, ``session/cancel`` → ``agent.cancel``; session events are projected to ``session/update``.

Prompt settlement (every prompt is answered exactly once):

* Each prompt's message carries a ``message_id`` in its source. The ``user/message`` event with that id tells
  which turn consumed the prompt; that turn's ``turn/end`` answers it: completed → ``end_turn``, max-tokens →
  ``max_tokens``, aborted and disposed → ``cancelled``, error → -32603 ``turn failed: <message>``. A second
  prompt during a turn is queued (``agent.send``), not rejected.
* ``session/cancel`` (and ``$/cancel_request`` for a running ``session/prompt``, whose -32800 answer then comes
  after the turn's last update) cancels the agent's turn and queue; every pending prompt of the session is answered
  ``cancelled`` once the aborted turn's ``turn/end`` went out (after a final ``failed`` update for any tool call
  still open), or after a 2 s watchdog, or at once when no turn was open. An idle cancel does nothing.
* A fallback for work dropped behind our back (another plugin cancelling the agent): when the agent turns idle,
  prompts whose message was never consumed are answered ``cancelled``.

Updates of a turn always precede the prompt's answer: both go through the one ordered writer, and the answer
is produced after the ``turn/end`` event was projected.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from dsh import events as ev
from dsh._log import get_logger
from dsh.checkpoints import in_view
from dsh.choices import SessionChoices
from dsh.errors import error_code, error_message
from dsh.events import TurnEndReason
from dsh.frontends.acp._auth import AGENT_METHOD_ID, AuthState, auth_methods
from dsh.frontends.acp._backpressure import FlowControl, stream_gate
from dsh.frontends.acp._boot import initialize_result
from dsh.frontends.acp._client_prompt import ClientPrompts, parse_system_prompt
from dsh.frontends.acp._commands import CommandDesk, commands_hooks
from dsh.frontends.acp._content import prompt_content
from dsh.frontends.acp._delegation import EditorDelegation
from dsh.frontends.acp._dispatch import MethodTable, make_dispatch, public_error
from dsh.frontends.acp._features import ClientFeatures
from dsh.frontends.acp._fork import ForkSessionParams, fork_session_method
from dsh.frontends.acp._gate import ApprovalDesk
from dsh.frontends.acp._listing import iso, list_sessions, normal
from dsh.frontends.acp._mcp import close_mcp, mcp_capabilities, open_mcp
from dsh.frontends.acp._notices import notice_updates
from dsh.frontends.acp._pickers import Pickers
from dsh.frontends.acp._projection import (
    Presenter,
    encode_chunk_frame,
    encode_update,
    failed_update,
    project,
    update_frame_prefix,
)
from dsh.frontends.acp._questions import QuestionDesk, exit_plan_mode_tool
from dsh.frontends.acp._replay import replay_frames
from dsh.frontends.acp._roots import add_session_roots
from dsh.frontends.acp._rpc import INTERNAL_ERROR, INVALID_PARAMS, RESOURCE_NOT_FOUND, Connection, RpcError, arrival
from dsh.frontends.acp._session import AcpSession, PendingPrompt
from dsh.frontends.acp._session_info import SetTitleParams, add_usage, prompt_usage, set_title_method, stored_title
from dsh.frontends.acp._steer import METHOD as STEER_METHOD
from dsh.frontends.acp._steer import settle_steers, steer, steer_logged
from dsh.frontends.acp._subagents import SUBAGENT_KINDS, ChildSessions
from dsh.frontends.acp._wire import (
    AuthenticateParams,
    CancelParams,
    InitializeParams,
    ListSessionsParams,
    LoadSessionParams,
    LogoutParams,
    NewSessionParams,
    PromptParams,
    SessionIdParams,
    SetConfigOptionParams,
    SetModelParams,
    SetModeParams,
    SteerParams,
)
from dsh.frontends.acp._worktree import delete_worktree, force_of, new_session_worktree, rpc_error, worktree_answer
from dsh.images import DEFAULT_MAX_PER_PROMPT
from dsh.kernel import Next, plugin
from dsh.notices import Notice, post_notice
from dsh.policy import SessionPolicy
from dsh.services.agents import Agent, AgentHandle, AgentOptions, AgentStatus
from dsh.services.llm import GenerateRequest, MessageSource
from dsh.services.sessions import ChunkEvent, check_session_id, title_from_content
from dsh.settings import DEFAULT_MODEL
from dsh.worktrees import WorktreeError

if TYPE_CHECKING:
    from dsh.kernel import Context
    from dsh.services.sessions import Session, SessionEvent

__all__ = ["AUTH_METHOD_ID", "AcpFrontend", "AcpOptions", "acp_plugin"]

AUTH_METHOD_ID = AGENT_METHOD_ID
CANCEL_WATCHDOG = 2.0
LIST_PAGE = 50
log = get_logger("dsh.acp")

_REPLAY_BATCH = 256
"""A replay yields to the event loop after this many events, so the writer sends frames while later ones are
made (a 1M-event load never holds all its frames at once)."""


@dataclass(frozen=True)
class AcpOptions:
    """How the front end reaches the client and what new sessions run."""

    send_frame: Callable[[bytes], None]
    model: str = DEFAULT_MODEL
    system_prompt: str | None = None
    models: tuple[str, ...] = ()
    """Models offered in the editor's model picker (the default model is always offered)."""
    flow: FlowControl | None = None
    """The writer's back-pressure: with it, model streams wait while the client is not reading."""
    max_images: int = DEFAULT_MAX_PER_PROMPT
    """Images one prompt may carry (the config file's ``images.max_per_prompt``)."""


def _stop_reason(reason: TurnEndReason) -> dict[str, Any] | RpcError:
    kind = reason.get("kind")
    if kind == "error":
        return RpcError(INTERNAL_ERROR, f"turn failed: {reason.get('message', 'unknown error')}")
    if kind == "max-tokens":
        return {"stopReason": "max_tokens"}
    if kind in ("aborted", "disposed"):
        return {"stopReason": "cancelled"}
    return {"stopReason": "end_turn"}


def _budget_stop_reason(stop: dict[str, Any]) -> dict[str, Any]:
    """A turn a spend budget stopped (:mod:`dsh.spend`): ``max_turn_requests`` (a limit of the agent's ended the
    turn before the model was done; the Claude Code adapter answers its own budget limit the same way), with the
    budget, its limit, the spend and the message under ``_meta.dsh.budget`` (RFC 0039)."""
    detail = {key: stop[key] for key in ("budget", "limit", "spent", "message") if key in stop}
    return {"stopReason": "max_turn_requests", "_meta": {"dsh": {"budget": detail}}}


def _resume_error(session_id: str, error: Exception) -> RpcError:
    """A resume failure as the JSON-RPC error a client can act on (never a bare -32603)."""
    code = error_code(error)
    data = {"sessionId": session_id}
    if code == "SESSION_NOT_FOUND" or isinstance(error, KeyError):
        return RpcError(RESOURCE_NOT_FOUND, f"unknown session {session_id!r}", data)
    if code == "SESSION_LOCKED":
        return RpcError(RESOURCE_NOT_FOUND, error_message(error), data | {"reason": "locked"})
    if code == "SESSION_CORRUPT":
        return RpcError(INTERNAL_ERROR, error_message(error), data | {"reason": "corrupt"})
    public = public_error(error)
    if public is not None:
        return RpcError(public.code, public.message, data | (public.data or {}))
    log.exception("resume failed", session_id=session_id)
    return RpcError(INTERNAL_ERROR, f"cannot open session {session_id}: {error_message(error)}", data)


class AcpFrontend:
    def __init__(self, ctx: Context, options: AcpOptions) -> None:
        self._ctx = ctx
        self._options = options
        self._send = options.send_frame
        self._sessions: dict[str, AcpSession] = {}
        self._generations = 0
        self._closing = False
        self._opening: set[str] = set()
        self._closing_ids: set[str] = set()
        self.client_capabilities: dict[str, Any] = {}
        self.features = ClientFeatures()
        self.auth = AuthState(ctx.llm)
        self.desk = CommandDesk(ctx, self)
        self.pickers = Pickers(ctx, options.model, options.models, self._update)
        self._capability_hooks: list[Callable[[dict[str, Any]], dict[str, Any]]] = []
        self.client_prompts = ClientPrompts()
        self.children = ChildSessions(
            lambda: self.features, options.send_frame, self._cancel_child, self._make_presenter
        )
        self.connection = Connection(
            options.send_frame, make_dispatch(self._methods()), notifications=frozenset({"session/cancel"})
        )

    def _methods(self) -> MethodTable:
        return {
            "initialize": (InitializeParams, self.initialize),
            "authenticate": (AuthenticateParams, self.authenticate),
            "logout": (LogoutParams, self.logout),
            "session/new": (NewSessionParams, self.new_session),
            "session/prompt": (PromptParams, self.prompt),
            "session/cancel": (CancelParams, self.cancel),
            "session/load": (LoadSessionParams, self.load_session),
            "session/resume": (LoadSessionParams, self.resume_session),
            "session/fork": (ForkSessionParams, partial(fork_session_method, self, self._ctx)),
            "session/list": (ListSessionsParams, self.list_sessions),
            "session/close": (SessionIdParams, self.close_session),
            "session/delete": (SessionIdParams, self.delete_session),
            "session/set_config_option": (SetConfigOptionParams, self.set_config_option),
            "session/set_model": (SetModelParams, self.set_model),
            "session/set_mode": (SetModeParams, self.set_mode),
            "session/set_title": (SetTitleParams, partial(set_title_method, self)),
            STEER_METHOD: (SteerParams, self.steer),
        }

    # -- methods ----------------------------------------------------------------------------------------

    async def initialize(self, params: InitializeParams) -> dict[str, Any]:
        """The answer is :func:`~dsh.frontends.acp._boot.initialize_result`, which the daemon also answers the
        first ``initialize`` with before this front end exists (then it calls this with the same params once it
        is built, so what is recorded here is recorded either way)."""
        self.client_capabilities = params.client_capabilities
        self.features = ClientFeatures.of(params.client_capabilities)  # what the newer updates are gated on
        meta = {
            key: value for hook in self._capability_hooks for key, value in hook(params.client_capabilities).items()
        }
        return initialize_result(
            durable=self._persistence() is not None,
            mcp=mcp_capabilities(self),
            meta=meta,
            auth_methods=auth_methods(self.client_capabilities),
            image=self._ctx.llm.takes_images(self._options.model),
            modern=self.features.modern,
        )

    async def authenticate(self, params: AuthenticateParams) -> dict[str, Any]:
        return self.auth.authenticate(params.method_id, self._options.model)

    async def logout(self, params: LogoutParams) -> dict[str, Any]:
        return self.auth.logout()

    async def new_session(self, params: NewSessionParams) -> dict[str, Any]:
        self._check_open()
        if not os.path.isabs(params.cwd):
            raise RpcError(INVALID_PARAMS, f"cwd must be an absolute path, got {params.cwd!r}", {"field": "cwd"})
        roots = params.additional_directories
        add_session_roots(None, "", roots)  # checked before anything is created
        given = parse_system_prompt(params.system_prompt)
        unserved = self._ctx.llm.unserved(self._options.model)
        if unserved is not None:
            raise RpcError(INTERNAL_ERROR, f"dsh cannot start a session: {unserved}", {"model": self._options.model})
        session_id = str(uuid.uuid4())
        worktrees = self._ctx.get("worktrees")
        opening = await new_session_worktree(worktrees, session_id, params.cwd, params.meta)  # RFC 0040
        cwd = opening.created.worktree.cwd if opening.created is not None else params.cwd
        remove_roots = add_session_roots(self._ctx.get("workspace"), session_id, roots)  # before the agent exists:
        try:  # the context plugin snapshots the session's roots when its agent is created
            handle = await self._ctx.agents.create(
                agent_id=session_id,
                session_id=session_id,
                meta={"cwd": cwd},
                agent_options=AgentOptions(model=self._options.model, system_prompt=self._options.system_prompt),
            )
        except BaseException:
            remove_roots()
            if opening.created is not None and worktrees is not None:
                with anyio.CancelScope(shield=True):
                    await worktrees.remove(session_id, force=True)
            raise
        record = self._record(session_id, cwd, handle, list(params.mcp_servers))
        record.remove_roots = remove_roots
        record.roots = list(roots)
        self.client_prompts.open(handle.agent.session, given)
        self._sessions[session_id] = record
        open_mcp(self, record)
        self.desk.opened(record)
        log.info("session created", session_id=session_id, cwd=cwd, mcp_servers=len(params.mcp_servers))
        return {"sessionId": session_id, **self.pickers.session_state(record), **worktree_answer(opening)}

    async def prompt(self, params: PromptParams) -> dict[str, Any]:
        record = self._session(params.session_id)
        number = arrival()
        invoked = self.desk.match(record, params.prompt)
        if invoked is None:
            content = prompt_content(
                params.prompt,
                accept_images=self._ctx.llm.takes_images(record.model),
                model=record.model,
                max_images=self._options.max_images,
            )
            self.auth.check_prompt(record.model)  # a prompt for the model: its key must be there
            await self.desk.wait_turn(record)
        else:
            result = await self.desk.run(record, *invoked, number)
            if result is None:
                return {"stopReason": "cancelled"}
            if result.prompt is None:
                return {"stopReason": result.stop_reason}
            content = result.prompt
            self.auth.check_prompt(record.model)
        if number < record.cancelled_at:
            return {"stopReason": "cancelled"}  # sent before a cancel that overtook this handler
        pending = PendingPrompt(message_id=str(uuid.uuid4()))
        record.prompts.append(pending)
        record.by_message[pending.message_id] = pending
        source: MessageSource = {"kind": "user", "message_id": pending.message_id}
        if invoked is not None or any(isinstance(b, dict) and b.get("type") != "text" for b in params.prompt):
            source["shown"] = params.prompt  # replays give back what the user sent (links, resources, commands)
        try:
            record.handle.agent.send(content, source)
        except Exception:
            self._forget(record, pending)
            raise
        try:
            await pending.done.wait()
        except anyio.get_cancelled_exc_class():
            if not pending.settled and not self._closing and self._sessions.get(record.id) is record:
                await self._withdraw(record, pending)  # $/cancel_request: stop the turn before the -32800
            raise
        finally:
            if not pending.settled:  # the request itself was cancelled ($/cancel_request, shutdown)
                pending.settled = True
                self._forget(record, pending)
        outcome = pending.outcome
        if isinstance(outcome, RpcError):
            raise outcome
        assert outcome is not None
        return outcome

    async def steer(self, params: SteerParams) -> dict[str, Any]:
        """``_dsh/session/steer``: the text joins the running turn at its next step boundary (:mod:`._steer`)."""
        record = self._session(params.session_id)
        content = prompt_content(
            params.prompt,
            accept_images=self._ctx.llm.takes_images(record.model),
            model=record.model,
            max_images=self._options.max_images,
        )
        return await steer(record, content, params.prompt)

    async def cancel(self, params: CancelParams) -> None:
        record = self._sessions.get(params.session_id)
        if record is None:
            self.children.cancel(params.session_id)  # a child the client sees: its own work only
            return
        self._cancel_work(record, arrival())

    async def _withdraw(self, record: AcpSession, prompt: PendingPrompt) -> None:
        """``$/cancel_request`` for a running prompt: cancel the session's work exactly as ``session/cancel``
        does, and wait (shielded, bounded by the cancel watchdog) until the prompt is settled, i.e. until the
        aborted turn's ``turn/end`` went out: the -32800 answer then follows every update of that turn, and the
        next prompt does not queue behind a turn that runs on."""
        with anyio.CancelScope(shield=True):
            self._cancel_work(record, arrival())
            with anyio.move_on_after(CANCEL_WATCHDOG + 0.5):
                await prompt.done.wait()

    def _cancel_work(self, record: AcpSession, at: int) -> None:
        """Cancel the session's turn and queue; *at*: the arrival number the cancel counts from."""
        record.cancelled_at = max(record.cancelled_at, at)
        pending = [p for p in record.prompts if not p.settled]
        agent = record.handle.agent
        if not pending and agent.status != "running":
            return  # an idle cancel changes nothing
        agent.cancel("session/cancel")
        settle_steers(record)  # the cancel emptied the steering FIFO: each steer gets its text back
        for prompt in pending:
            prompt.cancelled = True
        if record.turn_open:
            self._generations += 1
            record.cancelling = self._generations
            self._ctx.spawn(self._watchdog, record, record.cancelling, name=f"acp-cancel-watchdog:{record.id}")
        else:
            self._settle_cancelled(record)

    def _record(self, session_id: str, cwd: str, handle: AgentHandle, mcp_servers: list[dict[str, Any]]) -> AcpSession:
        choices = self._ctx.get("choices")
        if choices is not None:
            state = choices.attach(session_id, self._options.model)
        else:  # an application without the core's choices (a test's): the session keeps its own
            policies = self._ctx.get("policy")
            policy = policies.session(session_id) if policies is not None else SessionPolicy()
            state = SessionChoices(self._options.model, policy=policy)
        record = AcpSession(session_id, cwd, handle, mcp_servers, state)
        record.present = self._make_presenter(session_id, cwd)
        record.names = {} if self.features.tool_names else None
        return record

    def _make_presenter(self, session_id: str, cwd: str) -> Presenter:
        tools = self._ctx.tools

        def present(name: str, arguments: Any) -> Any:
            tool = tools.get(name, session_id)
            show = tool.meta.get("present") if tool is not None else None
            if show is None:
                return None
            try:
                return show(arguments, cwd)
            except Exception:  # a presenter must never break the stream: fall back to the generic card
                log.warning("tool presenter failed", tool=name, session_id=session_id)
                return None

        return present

    def _cancel_child(self, session_id: str) -> bool:
        for agent in self._ctx.agents.list():
            if agent.session.id == session_id:
                agent.cancel("session/cancel")
                return True
        return False

    # -- session state: the pickers (dsh.frontends.acp._pickers) -----------------------------------------

    async def set_config_option(self, params: SetConfigOptionParams) -> dict[str, Any]:
        record = self._session(params.session_id)
        self.pickers.set(record, params.config_id, params.value)
        return {"configOptions": self.pickers.config_options(record)}

    async def set_mode(self, params: SetModeParams) -> dict[str, Any]:
        record = self._session(params.session_id)
        self.pickers.switch_mode(record, params.mode_id)
        return {}

    async def set_model(self, params: SetModelParams) -> dict[str, Any]:
        """The legacy model API (``session/set_model``), for clients older than config options."""
        record = self._session(params.session_id)
        self.pickers.switch_model(record, params.model_id)
        return {}

    async def route_request(
        self,
        agent: Agent,
        turn: int,
        step: int,
        request: GenerateRequest,
        next_: Next[GenerateRequest, GenerateRequest],
    ) -> GenerateRequest:
        """``agent/request``: a session's model choice applies from its next step on."""
        record = self._sessions.get(agent.session.id)
        if record is not None:
            request = self.pickers.request_for(record, request)
        return await next_(request)

    # -- durable sessions -------------------------------------------------------------------------------

    def _persistence(self) -> Any:
        return self._ctx.get("session_persistence")

    def _stored_id(self, session_id: str) -> str:
        try:
            return check_session_id(session_id)
        except ValueError as exc:
            raise RpcError(INVALID_PARAMS, str(exc), {"sessionId": session_id[:200]}) from None

    async def load_session(self, params: LoadSessionParams) -> dict[str, Any]:
        """Resume a stored session and replay its whole log as updates, then answer."""
        record = await self._open_stored(params)
        open_mcp(self, record)
        flow = self._options.flow  # the writer's back-pressure (RFC 0008), where the daemon has one
        prefix, send, features = record.frame_prefix, self._send, self.features

        shown = in_view(record.handle.agent.session.events)  # a /rewind's turns are not replayed
        children = await self.children.load_children(shown, self._persistence())  # each child's own log

        def frames_of(event: SessionEvent) -> list[bytes]:
            if features.subagents and event.type in SUBAGENT_KINDS:  # the child announced, then its whole log
                return self.children.replay_frames(record.id, record.cwd, event, children, record.names)
            updates = project(event, replay=True, present=record.present, features=features, names=record.names)
            return [prefix + encode_update(update) + b"}}" for update in updates]

        for frames in replay_frames(shown, prefix, frames_of, _REPLAY_BATCH):
            for frame in frames:
                send(frame)
            # Let the writer take what is queued (frames go out as they are made); a client that does not read
            # makes the replay wait here, so at most the writer's limit plus one batch of frames is held.
            if flow is not None and flow.congested():
                await flow.ready()
            else:
                await anyio.lowlevel.checkpoint()
        self._sessions[record.id] = record
        self.desk.opened(record)
        return self.pickers.session_state(record)

    async def resume_session(self, params: LoadSessionParams) -> dict[str, Any]:
        """Resume a stored session without replaying it."""
        record = await self._open_stored(params)
        open_mcp(self, record)
        self._sessions[record.id] = record
        self.desk.opened(record)
        return self.pickers.session_state(record)

    async def _open_stored(self, params: LoadSessionParams) -> AcpSession:
        self._check_open()
        session_id = self._stored_id(params.session_id)
        if not os.path.isabs(params.cwd):
            raise RpcError(INVALID_PARAMS, f"cwd must be an absolute path, got {params.cwd!r}", {"field": "cwd"})
        if session_id in self._sessions or session_id in self._opening:
            raise RpcError(INVALID_PARAMS, f"session {session_id} is already open", {"sessionId": session_id})
        self.children.refuse(session_id)  # a child this client sees is shown through its parent
        add_session_roots(None, "", params.additional_directories)  # checked before anything is opened
        given = parse_system_prompt(params.system_prompt)
        if self._persistence() is None:
            raise RpcError(INTERNAL_ERROR, "session persistence is not configured")
        worktrees = self._ctx.get("worktrees")
        try:
            worktree = await worktrees.reopen(session_id) if worktrees is not None else None  # gone by hand: said here
        except WorktreeError as error:
            raise rpc_error(error) from None
        self._opening.add(session_id)
        remove_roots = add_session_roots(self._ctx.get("workspace"), session_id, params.additional_directories)
        try:
            handle = await self._ctx.agents.resume(
                agent_id=session_id,
                resume_session_id=session_id,
                agent_options=AgentOptions(model=self._options.model, system_prompt=self._options.system_prompt),
            )
        except Exception as exc:
            remove_roots()
            raise _resume_error(session_id, exc) from None
        finally:
            self._opening.discard(session_id)
        session = handle.agent.session
        stored_cwd = session.header.cwd
        allowed = {normal(stored_cwd)} if stored_cwd is not None else set()
        if worktree is not None:  # a worktree session is also opened from the directory it was started in
            allowed.add(normal(worktree.origin))
        if stored_cwd is None or normal(params.cwd) not in allowed:
            remove_roots()
            await handle.dispose()
            raise RpcError(
                INVALID_PARAMS,
                f"session {session_id} belongs to {stored_cwd or 'no directory'}, not {params.cwd}",
                {"sessionId": session_id, "cwd": stored_cwd},
            )
        cwd = stored_cwd if worktree is not None else params.cwd  # a worktree session works in its worktree
        record = self._record(session_id, cwd, handle, list(params.mcp_servers))
        record.remove_roots = remove_roots
        record.roots = list(params.additional_directories)
        recorded = session.events_without_chunks()  # a big session is nearly all chunks: walk the rest only
        policies = self._ctx.get("policy")
        if policies is not None:
            policies.restore(session_id, recorded)  # the session's own "always" rules (record.policy is this object)
        self.pickers.restore(record, recorded)
        self.client_prompts.open(session, given, recorded)
        record.title = stored_title(recorded)
        record.titled = record.title is not None or any(event.type == "user/message" for event in recorded)
        last = next((event for event in reversed(recorded) if event.type == "turn/start"), None)
        record.current_turn = int(last.data["turn"]) if last is not None else None
        return record

    async def list_sessions(self, params: ListSessionsParams) -> dict[str, Any]:
        titles = {record.id: record.title for record in self._sessions.values() if record.title is not None}
        worktrees = self._ctx.get("worktrees")
        return await list_sessions(self._persistence(), params, titles, worktrees.listing() if worktrees else None)

    async def close_session(self, params: SessionIdParams) -> dict[str, Any]:
        """Cancel the session's work as ``session/cancel`` would, then dispose its agent and free it."""
        record = self._session(params.session_id)
        if record.id in self._closing_ids:
            raise RpcError(INVALID_PARAMS, f"session {record.id} is already closing", {"sessionId": record.id})
        self._closing_ids.add(record.id)
        try:
            await self._close(record)
        finally:
            self._closing_ids.discard(record.id)
        return {}

    async def delete_session(self, params: SessionIdParams) -> dict[str, Any]:
        """Close the session if it is open here, then remove it from storage (unknown ids succeed)."""
        session_id = self._stored_id(params.session_id)
        worktrees, force = self._ctx.get("worktrees"), force_of(params.meta)
        await delete_worktree(worktrees, session_id, force=force, check_only=True)  # uncommitted work: refused
        record = self._sessions.get(session_id)
        if record is not None:
            await self._close(record)
        persistence = self._persistence()
        if persistence is not None:
            try:
                await persistence.delete(session_id)
            except Exception as exc:
                raise _resume_error(session_id, exc) from None
        removed = await delete_worktree(worktrees, session_id, force=force, check_only=False)
        if removed is None:
            return {}
        return {"_meta": {"dsh": {"worktree": {"message": removed.message, "branchDeleted": removed.branch_deleted}}}}

    async def _close(self, record: AcpSession, reason: str = "session/close") -> None:
        """Cancel, then dispose while the session is still ours, so the aborted turn's real last updates
        (tool results, the end of the turn) reach the client live exactly as a later load will replay them.
        Disposal is bounded by the agent itself (a loop that does not stop in time is cancelled); whatever is
        still open afterwards is closed here: every tool card ends, every prompt is answered."""
        record.handle.agent.cancel(reason)
        settle_steers(record)
        for prompt in record.prompts:
            prompt.cancelled = True
        await record.handle.dispose()
        await close_mcp(self, record.id, reason)
        self._settle_cancelled(record)
        self._sessions.pop(record.id, None)
        self.children.forget(record.id)
        self.client_prompts.close(record.id)
        self.desk.closed(record.id)
        record.remove_roots()

    # -- events -----------------------------------------------------------------------------------------

    def on_session_event(self, session: Session, event: SessionEvent) -> None:
        record = self._sessions.get(session.id)
        if record is None:
            self.children.on_child(session, event)  # a sub-agent the client sees as a session of its own
            return
        if type(event) is ChunkEvent:  # nearly every event of a turn: straight to the frame's bytes
            self._send(encode_chunk_frame(record.frame_prefix, event))
            return
        if event.type in SUBAGENT_KINDS and self.features.subagents:
            self.children.on_parent(record.id, record.cwd, event, record.names)
            return
        for update in project(event, present=record.present, features=self.features, names=record.names):
            self._update(record.id, update)
        kind = event.type
        if kind == "assistant/chunk":
            return
        data = event.data
        if kind == "turn/start":
            record.current_turn = data["turn"]
            record.turn_open = True
            record.turn_usage = {}
            record.budget_stop = None
        elif kind == "steering/message":
            steer_logged(record, kind, data)
        elif kind == "user/message":
            steer_logged(record, kind, data)
            source = data.get("source") or {}
            prompt = record.by_message.get(source.get("message_id", "")) if isinstance(source, dict) else None
            if prompt is not None:
                prompt.turn = record.current_turn
            if not record.titled:
                title = title_from_content(data.get("content", []))
                if title is not None:
                    record.titled = True
                    self._update(
                        record.id,
                        {"sessionUpdate": "session_info_update", "title": title, "updatedAt": iso(event.time)},
                    )
        elif kind == "usage":
            add_usage(record.turn_usage, data.get("usage") or {})
            self._send_usage(record, data.get("usage") or {})
        elif kind == "spend/stop":
            record.budget_stop = data
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
        settle_steers(record)  # idle: nothing steering is left, a steer not taken was dropped behind our back
        for prompt in list(record.prompts):
            if prompt.turn is None and not prompt.settled:
                self._settle(record, prompt, {"stopReason": "cancelled"})

    # -- settlement -------------------------------------------------------------------------------------

    def _turn_ended(self, record: AcpSession, turn: int, reason: TurnEndReason) -> None:
        if record.cancelling:
            self._settle_cancelled(record)
        outcome = _stop_reason(reason)
        stop = record.budget_stop
        if stop is not None and stop.get("turn") == turn and reason.get("kind") in ("completed", "error"):
            outcome = _budget_stop_reason(stop)
        if self.features.modern and isinstance(outcome, dict):  # the turn's totals, for clients that read them
            outcome = {**outcome, "usage": prompt_usage(record.turn_usage)}
        for prompt in list(record.prompts):
            if prompt.turn == turn:
                self._settle(record, prompt, outcome)

    def _settle_cancelled(self, record: AcpSession) -> None:
        record.cancelling = 0
        for call_id in list(record.open_calls):
            self._update(record.id, failed_update(call_id, "Cancelled by the user.", record.names))
        record.open_calls.clear()
        for prompt in list(record.prompts):
            if prompt.cancelled:
                self._settle(record, prompt, {"stopReason": "cancelled"})

    def _settle(self, record: AcpSession, prompt: PendingPrompt, outcome: dict[str, Any] | RpcError) -> None:
        if prompt.settled:
            return
        prompt.settled = True
        prompt.outcome = outcome
        self._forget(record, prompt)
        prompt.done.set()

    def _forget(self, record: AcpSession, prompt: PendingPrompt) -> None:
        if prompt in record.prompts:
            record.prompts.remove(prompt)
        record.by_message.pop(prompt.message_id, None)

    async def _watchdog(self, record: AcpSession, generation: int) -> None:
        await anyio.sleep(CANCEL_WATCHDOG)
        if record.cancelling == generation:
            log.warning("cancelled turn did not end in time; answering its prompts", session_id=record.id)
            self._settle_cancelled(record)

    # -- lifecycle --------------------------------------------------------------------------------------

    def _send_usage(self, record: AcpSession, usage: dict[str, Any]) -> None:
        """``usage_update`` after a step: ``used`` = the tokens now in the context (the step's input and its
        output), ``size`` = the model's context window. Sent only when the window is known (``size`` is
        required, and a made-up window would be worse than none)."""
        context = self._ctx.get("context")
        if context is not None:  # the context plugin knows built-in windows, prices and the session's figures
            update = context.usage_update(record.id, record.model)
            if update is not None:
                self._update(record.id, self._with_budget(record, update))
            return
        from dsh.context import usage_update

        size = self._ctx.llm.model_info(record.model).context_window
        update = usage_update(int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0), size)
        if update is not None:
            self._update(record.id, self._with_budget(record, update))

    def _with_budget(self, record: AcpSession, update: dict[str, Any]) -> dict[str, Any]:
        """*update* with the session's spend against its budgets (``_meta.dsh.budget``: ``{name: {limit,
        spent}}``) for a client that reads newer fields, when a budget is set; unchanged otherwise (an older
        client's frame stays byte-identical)."""
        spend = self._ctx.get("spend")
        if not self.features.modern or spend is None:
            return update
        figures = spend.figures(record.id)
        if not figures:
            return update
        meta = dict(update.get("_meta") or {})
        meta["dsh"] = {**(meta.get("dsh") or {}), "budget": figures}
        return {**update, "_meta": meta}

    @property
    def mcp(self) -> Any:
        """The MCP plugin's manager, when it is loaded."""
        return self._ctx.get("mcp")

    def session_record(self, session_id: str) -> AcpSession | None:
        """The live ACP session *session_id*, if it is one of this front end's."""
        return self._sessions.get(session_id)

    def refuse_child(self, session_id: str) -> None:
        self.children.refuse(session_id)

    async def stored(self, session_id: str) -> bool:
        persistence = self._persistence()
        return persistence is not None and await persistence.has(self._stored_id(session_id))

    def owns(self, session_id: str) -> bool:
        """Whether *session_id* is one of this front end's live sessions."""
        return session_id in self._sessions

    def add_capability_hook(self, hook: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[[], None]:
        """Call *hook* with the client's capabilities at ``initialize``; the entries it returns go into the
        answer's ``agentCapabilities._meta``. Returns the remover."""
        self._capability_hooks.append(hook)
        return lambda: self._capability_hooks.remove(hook) if hook in self._capability_hooks else None

    def notify(self, method: str, params: dict[str, Any]) -> None:
        """Send an extension notification (*method* starts with ``_``) through the writer ``session/update``
        uses, at once: notifications and updates reach the client in the order they were sent."""
        frame = {"jsonrpc": "2.0", "method": method, "params": params}
        self._send(json.dumps(frame, separators=(",", ":"), allow_nan=False).encode())

    def post_notice(self, notice: Notice) -> None:
        """Post *notice* on the ``session/notice`` seam (this front end renders it like anyone's)."""
        post_notice(self._ctx, notice)

    def on_notice(self, notice: Notice) -> None:
        """``session/notice``: shown on the session's stream as the client can (:mod:`._notices`)."""
        if notice.session_id in self._sessions:
            for update in notice_updates(notice, self.features):
                self._update(notice.session_id, update)
        else:  # a sub-agent's, on its own session when the client sees it
            self.children.send(notice.session_id, notice_updates(notice, self.features))

    def tool_update(self, session_id: str, update: dict[str, Any]) -> None:
        """Send an update about a running tool call (an editor terminal attached to its card)."""
        record = self._sessions.get(session_id)
        if record is not None:
            names, call = record.names, update.get("toolCallId")
            if names is not None and call in names and update.get("sessionUpdate") == "tool_call_update":
                update = {**update, "name": names[call]}
            self._update(session_id, update)

    def _update(self, session_id: str, update: dict[str, Any]) -> None:
        """Send one ``session/update`` (text chunks take :func:`encode_chunk_frame` instead): the session's
        cached frame prefix, or one made for a session without a record yet."""
        record = self._sessions.get(session_id)
        prefix = record.frame_prefix if record is not None else update_frame_prefix(session_id)
        self._send(prefix + encode_update(update) + b"}}")

    def _check_open(self) -> None:
        if self._closing:
            raise RpcError(INTERNAL_ERROR, "dsh is shutting down")

    def _session(self, session_id: str) -> AcpSession:
        self._check_open()
        record = self._sessions.get(session_id)
        if record is None:
            self.children.refuse(session_id)  # a child: -32602, it is driven through its parent
            raise RpcError(RESOURCE_NOT_FOUND, f"unknown session {session_id!r}", {"sessionId": session_id})
        return record

    async def shutdown(self) -> None:
        """Cancel every turn, answer every pending prompt ``cancelled``, dispose every agent (each closing
        ``turn/end`` is flushed while its session is still attached)."""
        self._closing = True
        async with anyio.create_task_group() as group:
            for record in list(self._sessions.values()):
                group.start_soon(self._close, record, "shutdown")


@plugin("acp", inject=("agents", "sessions", "llm", "tools"))
def acp_plugin(ctx: Context, options: AcpOptions) -> None:
    frontend = AcpFrontend(ctx, options)
    ctx.on(ev.SESSION_EVENT, frontend.on_session_event)
    ctx.on(ev.AGENT_STATUS, frontend.on_agent_status)
    ctx.on(ev.SESSION_NOTICE, frontend.on_notice)
    ctx.on(ev.SYSTEM_PROMPT_ASSEMBLE, frontend.client_prompts.on_assemble)
    ctx.on(ev.AGENT_REQUEST, frontend.route_request)
    if options.flow is not None:
        ctx.on(ev.LLM_STREAM, stream_gate(options.flow))
    ctx.on(ev.USER_APPROVE, ApprovalDesk(frontend).approve)
    delegation = EditorDelegation(frontend)
    ctx.on(ev.WORKSPACE_READ, delegation.read)
    ctx.on(ev.WORKSPACE_WRITE, delegation.write)
    ctx.on(ev.WORKSPACE_RUN, delegation.run)
    commands_hooks(ctx, frontend.desk)
    ctx.on(ev.USER_ASK, QuestionDesk(frontend).ask)
    ctx.tools.register(exit_plan_mode_tool(ctx, frontend))
    ctx.provide("acp", frontend)
