"""The ``context`` plugin: the built-in system prompt sections, per-session context state, and (on
``agent/request``) the context accounting and compaction of :mod:`._compaction`.

:class:`ContextService` (``ctx.context``) is the face of five parts, each in its own module: the prompt
sections (:mod:`._prompt`), accounting and cost (:mod:`._costs`), mode lookup (:mod:`._modes`), compaction and
pruning (:mod:`._compactor`) and the overflow retry (:mod:`._overflow`); they share the per-session state of
:mod:`._state`.

Seams: ``system-prompt/assemble`` (adds the sections, then applies ``system_prompt_sections`` overrides),
``agent/created`` / ``agent/disposed`` (the per-session snapshot: environment and project instructions, computed
once per session start, resume or load), ``agent/request`` (records which instruction files were used, once per
change, as a ``context/instructions`` session event).

Guarantees: nothing here runs a subprocess or touches the network on the per-step path; the rendered sections are
a pure function of (tools given to the model, the session's mode, the session snapshot, the config), so the
system prompt is byte-identical from step to step unless one of those changed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dsh import events as ev
from dsh._log import get_logger
from dsh.context._accounting import CALIBRATION_EVENT
from dsh.context._compactor import Compactor
from dsh.context._config import ContextConfig
from dsh.context._costs import ContextAccounting
from dsh.context._modes import ModeLookup, ModeProvider
from dsh.context._notes import SessionNotes
from dsh.context._overflow import OverflowRetry, is_overflow
from dsh.context._prompt import PromptSections
from dsh.context._state import INSTRUCTIONS_EVENT, SessionContext, SessionStates
from dsh.kernel import Disposer, Next, plugin
from dsh.services.llm import estimate_request
from dsh.services.sessions import ignores_text_chunks

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from dsh.kernel import CancelToken, Context
    from dsh.services.agents import Agent, CompactRequest
    from dsh.services.llm import GenerateRequest, Price, StreamChunk, ToolSchema
    from dsh.services.sessions import Session, SessionEvent
    from dsh.services.system_prompt import PromptAssembly, PromptSection

__all__ = ["INSTRUCTIONS_EVENT", "ContextService", "SessionContext", "context_plugin", "is_overflow"]

log = get_logger("dsh.context")


class ContextService:
    """``ctx.context``: per-session context state and the section machinery (see the module docstring)."""

    def __init__(self, ctx: Context, config: ContextConfig) -> None:
        self._ctx = ctx
        self.config = config
        self._sessions: SessionStates = {}
        self.modes = ModeLookup(ctx)
        self.accounting = ContextAccounting(ctx, self._sessions)
        self.prompt = PromptSections(ctx, config, self._sessions, self.modes)
        self.notes = SessionNotes(self.modes)
        self.compactor = Compactor(ctx, config, self._sessions, self.accounting)
        self.overflow = OverflowRetry(ctx, config, self._sessions, self.compactor)

    # -- per-session state ------------------------------------------------------------------------------

    def session(self, session_id: str) -> SessionContext | None:
        return self._sessions.get(session_id)

    def open_session(self, session_id: str, cwd: str | None, roots: tuple[str, ...] = ()) -> SessionContext:
        """Snapshot the environment and project instructions of a session in *cwd* (start, resume, load)."""
        return self.prompt.open_session(session_id, cwd, roots)

    def on_agent_created(self, agent: Agent) -> None:
        header = agent.session.header
        try:
            workspace = self._ctx.get("workspace")
            roots = workspace.session_roots(agent.session.id) if workspace is not None else ()
            state = self.open_session(agent.session.id, header.cwd, roots)
            state.model = agent.options.model
            self.prompt.start_git(state)
            self.accounting.replay(state, agent.session)
            self.notes.replay(state, agent.session)
        except Exception:  # a broken environment must not break the session: the sections are left out
            log.exception("context snapshot failed", session_id=agent.session.id)
            self._sessions[agent.session.id] = SessionContext(agent.session.id)

    def on_agent_disposed(self, agent: Agent) -> None:
        self._sessions.pop(agent.session.id, None)
        self.overflow.forget(agent)

    def on_session_event(self, session: Session, event: SessionEvent) -> None:
        """``session/event``: keep the session's figures current (O(size of the event))."""
        self.accounting.on_session_event(session, event)

    @ignores_text_chunks
    def on_note_event(self, session: Session, event: SessionEvent) -> None:
        """``session/event``: which session facts (mode, date) the model was last told (:mod:`._notes`)."""
        state = self._sessions.get(session.id)
        if state is not None:
            self.notes.on_event(state, event)

    # -- models: window and price -----------------------------------------------------------------------

    def window(self, model: str) -> int | None:
        """The context window of *model*: the configured one, else the built-in table's, else None."""
        return self.accounting.window(model)

    def price(self, model: str) -> Price | None:
        return self.accounting.price(model)

    def tokens_in_use(self, session_id: str) -> int | None:
        """The session's context in use (see :mod:`._accounting`); None when unknown."""
        return self.accounting.tokens_in_use(session_id)

    def usage_update(self, session_id: str, model: str) -> dict[str, Any] | None:
        """The ACP ``usage_update`` for the session now (None when the window or the figure is unknown)."""
        return self.accounting.usage_update(session_id, model)

    # -- mode -------------------------------------------------------------------------------------------

    def mode_provider(self, provider: ModeProvider) -> Disposer:
        """Tell the mode section where a session's mode comes from (a front end with modes registers one)."""
        return self.modes.mode_provider(provider)

    def mode_of(self, session_id: str) -> str | None:
        return self.modes.mode_of(session_id)

    # -- sections ---------------------------------------------------------------------------------------

    def builtin_sections(self, assembly: PromptAssembly) -> list[PromptSection]:
        """The built-in sections for *assembly* (its tools, its agent's session)."""
        return self.prompt.builtin_sections(assembly)

    def apply_overrides(self, sections: list[PromptSection]) -> list[PromptSection]:
        """``system_prompt_sections``: ``false`` removes a section, a string replaces its text."""
        return self.prompt.apply_overrides(sections)

    async def on_assemble(
        self, assembly: PromptAssembly, next_: Next[PromptAssembly, PromptAssembly]
    ) -> PromptAssembly:
        """``system-prompt/assemble``: the built-in sections join the registered ones, then the overrides."""
        return await self.prompt.on_assemble(assembly, next_)

    # -- the step request -------------------------------------------------------------------------------

    async def on_request(
        self,
        agent: Agent,
        turn: int,
        step: int,
        request: GenerateRequest,
        next_: Next[GenerateRequest, GenerateRequest],
    ) -> GenerateRequest:
        """Record which instruction files this session's prompt uses (once, and again when they change), and
        which model the step uses (after every other listener: the front end may switch it); then prune or
        compact when the request would pass the threshold, and note the request for the overflow retry."""
        state = self._sessions.get(agent.session.id)
        self.prompt.record_instructions(agent, state)
        request = await next_(request)
        if state is None:
            return request
        request = self.prompt.with_session_tools(state, request)
        state.model = request.model
        ratio = state.accounting.ratio_to_record()
        if ratio is not None:  # so a reload starts from this session's calibration, not from 1
            state.accounting.recorded_ratio = ratio
            agent.session.append(CALIBRATION_EVENT, {"ratio": round(ratio, 4)})
        request = self.notes.update(agent, state, request)  # before: the compaction's measure includes it
        request = await self.compactor.maybe_compact(agent, turn, state, request)
        told = self.notes.update(agent, state, request)  # after a compaction: a note it removed is told again
        if told is not request:
            if state.accounting.sent_estimate is not None:
                state.accounting.sent_estimate = estimate_request(told.messages, told.system, told.tools)
            request = told
        self.overflow.note(request, agent, turn)
        return request

    # -- compaction -------------------------------------------------------------------------------------

    async def compact_session(
        self,
        agent: Agent,
        *,
        trigger: str,
        model: str,
        signal: CancelToken | None,
        system: str | None = None,
        tools: list[ToolSchema] | None = None,
        tokens_before: int | None = None,
        window: int | None = None,
        instructions: str | None = None,
        manual: bool = False,
        tail_budget: int | None = None,
    ) -> dict[str, Any] | None:
        """Summarise the session's older history now (see :meth:`Compactor.compact_session`)."""
        return await self.compactor.compact_session(
            agent,
            trigger=trigger,
            model=model,
            signal=signal,
            system=system,
            tools=tools,
            tokens_before=tokens_before,
            window=window,
            instructions=instructions,
            manual=manual,
            tail_budget=tail_budget,
        )

    async def on_compact(
        self,
        agent: Agent,
        turn: int,
        request: CompactRequest,
        next_: Next[CompactRequest, dict[str, Any] | None],
    ) -> dict[str, Any] | None:
        """``agent/compact`` (``agent.compact(instructions)``): summarise now, keeping ``keep_recent_turns``."""
        return await self.compactor.on_compact(agent, turn, request, next_)

    # -- overflow: one compaction, one retry ------------------------------------------------------------

    async def on_stream(
        self, request: GenerateRequest, next_: Next[GenerateRequest, AsyncIterator[StreamChunk]]
    ) -> AsyncIterator[StreamChunk]:
        """``llm/stream``: see :class:`OverflowRetry`."""
        return await self.overflow.on_stream(request, next_)


@plugin("context", inject=("system_prompt", "agents", "llm", "sessions"), config=ContextConfig)
def context_plugin(ctx: Context, config: ContextConfig) -> None:
    service = ContextService(ctx, config)
    ctx.on(ev.AGENT_CREATED, service.on_agent_created)
    ctx.on(ev.AGENT_DISPOSED, service.on_agent_disposed)
    ctx.on(ev.SESSION_EVENT, service.accounting.on_session_event)
    ctx.on(ev.SESSION_EVENT, service.on_note_event)
    ctx.on(ev.SYSTEM_PROMPT_ASSEMBLE, service.prompt.on_assemble, prepend=True)
    ctx.on(ev.AGENT_REQUEST, service.on_request, prepend=True)
    ctx.on(ev.LLM_STREAM, service.overflow.on_stream)
    ctx.on(ev.AGENT_COMPACT, service.compactor.on_compact)
    ctx.provide("context", service)
