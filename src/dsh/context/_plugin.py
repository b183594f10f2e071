"""The ``context`` plugin: the built-in system prompt sections, per-session context state, and (on
``agent/request``) the context accounting and compaction of :mod:`._compaction`.

Seams: ``system-prompt/assemble`` (adds the sections, then applies ``system_prompt_sections`` overrides),
``agent/created`` / ``agent/disposed`` (the per-session snapshot: environment and project instructions, computed
once per session start, resume or load), ``agent/request`` (records which instruction files were used, once per
change, as a ``context/instructions`` session event).

Guarantees: nothing here runs a subprocess or touches the network on the per-step path; the rendered sections are
a pure function of (tools given to the model, the session's mode, the session snapshot, the config), so the
system prompt is byte-identical from step to step unless one of those changed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, cast

import anyio

from dsh import events as ev
from dsh._log import get_logger
from dsh.context._accounting import CALIBRATION_EVENT, Accounting
from dsh.context._compaction import build_summary_request, compaction_data, plan_compaction, summarise
from dsh.context._config import ContextConfig
from dsh.context._environment import Environment, snapshot
from dsh.context._gitstatus import GIT_DEADLINE, GitSummary, git_summary
from dsh.context._instructions import Instructions, find_instruction_files, load_instructions
from dsh.context._models import builtin_price, builtin_window
from dsh.context._pruning import plan_prune
from dsh.context._sections import IDENTITY, ORDER, mode_text, tools_text
from dsh.context._usage import usage_update
from dsh.errors import DshError, LlmError, error_code, error_message
from dsh.kernel import AbortedError, Disposer, Next, current_scope, plugin
from dsh.services.llm import estimate_request
from dsh.services.sessions import COMPACTION_EVENT, PRUNE_EVENT, ignores_text_chunks, summary_message
from dsh.services.system_prompt import PromptAssembly, PromptSection

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from dsh.kernel import CancelToken, Context
    from dsh.services.agents import Agent, CompactRequest
    from dsh.services.llm import GenerateRequest, Price, StreamChunk, ToolSchema, Usage
    from dsh.services.sessions import Session, SessionEvent

__all__ = ["INSTRUCTIONS_EVENT", "ContextService", "SessionContext", "context_plugin"]

log = get_logger("dsh.context")
INSTRUCTIONS_EVENT = "context/instructions"
EXTRA_ORDER = 900
TOOLS_TEXTS = 64
"""Tool lists whose rendered section is kept (a handful per process: the global set, each session's MCP set)."""
PRUNE_TARGET = 0.75
"""A prune alone is enough when it brings the request under this fraction of the threshold; otherwise the
history is summarised too (a prune that leaves the request just under the threshold would be followed by
another cache-breaking change a step later)."""
"""Where a configured section whose name no plugin registered goes (after the built-in ones)."""

ModeProvider = Callable[[str], "str | None"]


@dataclass(slots=True)
class SessionContext:
    """What the context plugin knows about one live session."""

    session_id: str
    environment: Environment | None = None
    git_summary: GitSummary | None = None
    git_ready: anyio.Event | None = None
    """Set once the git summary is known (or given up); None when there is nothing to wait for."""
    instructions: Instructions = field(default_factory=lambda: Instructions(""))
    model: str | None = None
    """The model of the session's last step (after every ``agent/request`` listener)."""
    accounting: Accounting = field(default_factory=Accounting)
    turn_starts: list[int] = field(default_factory=list)
    """Seqs of the ``turn/start`` events after the last compaction's cut."""
    in_turn: bool = False
    turn_start: int | None = None
    """Seq of the running turn's ``turn/start`` (None between turns)."""
    step_starts: list[int] = field(default_factory=list)
    """Seqs of the running turn's ``step/start`` events (a compaction may cut at one of them)."""
    pruned: set[int] = field(default_factory=set)
    """Seqs of the ``tool/result`` events a ``context/prune`` already stubbed."""
    spills: dict[int, str] = field(default_factory=dict)
    """Seq of a ``tool/result`` → the file its full output was spilled to (its data's ``spill``)."""
    compacted_upto: int = 0
    failed_turn: int | None = None
    """The turn in which a threshold compaction failed (not retried before the next turn)."""
    tools_section: str = ""
    """The tools section the session's last assembly rendered (from the global tools)."""
    recorded_files: list[str] | None = None
    """The instruction files last recorded in the session log (``context/instructions``)."""
    extra: dict[str, Any] = field(default_factory=dict)


class ContextService:
    """``ctx.context``: per-session context state and the section machinery (see the module docstring)."""

    def __init__(self, ctx: Context, config: ContextConfig) -> None:
        self._ctx = ctx
        self.config = config
        self._sessions: dict[str, SessionContext] = {}
        self._mode_providers: list[ModeProvider] = []
        self._inflight: dict[int, tuple[GenerateRequest, Agent, int]] = {}
        """id(request) → (request, agent, turn) of each agent's current step request (for the overflow retry)."""
        self._tools_texts: dict[tuple[tuple[str, str], ...], str] = {}

    # -- per-session state ------------------------------------------------------------------------------

    def session(self, session_id: str) -> SessionContext | None:
        return self._sessions.get(session_id)

    def open_session(self, session_id: str, cwd: str | None, roots: tuple[str, ...] = ()) -> SessionContext:
        """Snapshot the environment and project instructions of a session in *cwd* (start, resume, load)."""
        state = SessionContext(session_id)
        if cwd is not None:
            environment = snapshot(cwd, roots)
            files = find_instruction_files(cwd, environment.git.root if environment.git else None)
            state.environment = environment
            state.instructions = load_instructions(files, self.config.instructions_cap)
        self._sessions[session_id] = state
        return state

    def on_agent_created(self, agent: Agent) -> None:
        header = agent.session.header
        try:
            workspace = self._ctx.get("workspace")
            roots = workspace.session_roots(agent.session.id) if workspace is not None else ()
            state = self.open_session(agent.session.id, header.cwd, roots)
            state.model = agent.options.model
            if state.environment is not None and state.environment.git is not None:
                state.git_ready = anyio.Event()
                self._ctx.spawn(
                    self._load_git, state, state.environment.git.root, name=f"git-summary:{agent.session.id}"
                )
            self._replay(state, agent.session)
        except Exception:  # a broken environment must not break the session: the sections are left out
            log.exception("context snapshot failed", session_id=agent.session.id)
            self._sessions[agent.session.id] = SessionContext(agent.session.id)

    async def _load_git(self, state: SessionContext, root: str) -> None:
        """The environment's git summary, computed once (two short git commands), off the per-step path."""
        ready = state.git_ready
        try:
            summary = await git_summary(root)
            if state.git_ready is ready:  # not given up meanwhile: the section must not change once sent
                state.git_summary = summary
        except Exception:
            log.warning("git summary failed", session_id=state.session_id)
        finally:
            if ready is not None:
                ready.set()

    async def _await_git(self, state: SessionContext) -> None:
        ready = state.git_ready
        if ready is None or ready.is_set():
            return
        with anyio.move_on_after(GIT_DEADLINE + 1.0):
            await ready.wait()
        if not ready.is_set():
            state.git_ready = None  # given up: the summary stays out for the whole session

    def _replay(self, state: SessionContext, session: Session) -> None:
        """A resumed session's figures: its log walked once, at open (never on the per-step path)."""
        price = self.price(state.model) if state.model else None
        for event in session.events_without_chunks():  # as live (on_session_event): chunks count for nothing
            self._account(state, event, price)
            if event.type == INSTRUCTIONS_EVENT:
                state.recorded_files = list(event.data.get("files") or [])

    def _account(self, state: SessionContext, event: SessionEvent, price: Price | None) -> None:
        kind = event.type
        if kind == "turn/start":
            state.turn_starts.append(event.seq)
            state.in_turn = True
            state.turn_start = event.seq
            state.step_starts = []
        elif kind == "step/start":
            if state.in_turn:
                state.step_starts.append(event.seq)
            return
        elif kind == "turn/end":
            state.in_turn = False
            state.turn_start = None
            state.step_starts = []
        elif kind == "tool/result":
            spill = event.data.get("spill")
            if isinstance(spill, str) and spill:
                state.spills[event.seq] = spill
        elif kind == "context/reset":  # /clear: nothing before it is in the conversation any more
            state.turn_starts = []
            state.pruned.clear()
            state.spills.clear()
            state.accounting.reset(0)
            return
        elif kind == CALIBRATION_EVENT:
            state.accounting.on_calibration(event.data.get("ratio"))
            return
        elif kind == PRUNE_EVENT:
            results = event.data.get("results")
            for entry in results if isinstance(results, list) else ():
                if isinstance(entry, dict) and type(entry.get("seq")) is int:
                    state.pruned.add(entry["seq"])
            after = event.data.get("tokens_after")
            if isinstance(after, int):
                state.accounting.reset(after)
            return
        elif kind == COMPACTION_EVENT:
            upto = event.data.get("upto")
            if isinstance(upto, int):
                state.compacted_upto = upto
                state.turn_starts = [seq for seq in state.turn_starts if seq >= upto]
                state.pruned = {seq for seq in state.pruned if seq >= upto}
                state.spills = {seq: path for seq, path in state.spills.items() if seq >= upto}
                state.accounting.reset(int(event.data.get("tokens_after") or 0))
            return
        if kind == "usage":
            state.accounting.on_usage(cast("Usage", event.data.get("usage") or {}), price)
        elif kind == "subagent/usage":  # a sub-agent's step: its cost is the session's, its tokens are not
            model = event.data.get("model") or state.model
            child_price = self.price(model) if isinstance(model, str) and model else None
            if child_price is not None:
                state.accounting.cost += child_price.cost(cast("Usage", event.data.get("usage") or {}))
                state.accounting.priced = True
        else:
            state.accounting.on_event(event)

    @ignores_text_chunks
    def on_session_event(self, session: Session, event: SessionEvent) -> None:
        """``session/event``: keep the session's figures current (O(size of the event))."""
        if event.type == "assistant/chunk":
            return
        state = self._sessions.get(session.id)
        if state is not None:
            self._account(state, event, self.price(state.model) if event.type == "usage" and state.model else None)

    # -- models: window and price -----------------------------------------------------------------------

    def window(self, model: str) -> int | None:
        """The context window of *model*: the configured one, else the built-in table's, else None."""
        return self._ctx.llm.model_info(model).context_window or builtin_window(model)

    def price(self, model: str) -> Price | None:
        return self._ctx.llm.model_info(model).price or builtin_price(model)

    def tokens_in_use(self, session_id: str) -> int | None:
        """The session's context in use (see :mod:`._accounting`); None when unknown."""
        state = self._sessions.get(session_id)
        return state.accounting.tokens() if state is not None else None

    def usage_update(self, session_id: str, model: str) -> dict[str, Any] | None:
        """The ACP ``usage_update`` for the session now (None when the window or the figure is unknown)."""
        state = self._sessions.get(session_id)
        size = self.window(model)
        used = state.accounting.tokens() if state is not None else None
        if state is None:
            return None
        accounting = state.accounting
        return usage_update(
            used,
            size,
            cost=accounting.cost if accounting.priced else None,
            cache_read=accounting.cache_read,
            cache_write=accounting.cache_write,
        )

    def on_agent_disposed(self, agent: Agent) -> None:
        self._sessions.pop(agent.session.id, None)
        for key, (_, owner, _) in list(self._inflight.items()):
            if owner is agent:
                del self._inflight[key]

    # -- mode -------------------------------------------------------------------------------------------

    def mode_provider(self, provider: ModeProvider) -> Disposer:
        """Tell the mode section where a session's mode comes from (a front end with modes registers one)."""
        self._mode_providers.append(provider)

        def remove() -> None:
            if provider in self._mode_providers:
                self._mode_providers.remove(provider)

        return (current_scope() or self._ctx.scope).effect(remove)

    def mode_of(self, session_id: str) -> str | None:
        for provider in self._mode_providers:
            mode = provider(session_id)
            if mode is not None:
                return mode
        return None

    # -- sections ---------------------------------------------------------------------------------------

    def _tools_section(self, tools: list[ToolSchema]) -> str:
        """The tools section for *tools* (cached per tool list: the same list renders the same bytes)."""
        key = tuple((tool["name"], tool.get("description", "")) for tool in tools)
        text = self._tools_texts.get(key)
        if text is None:
            if len(self._tools_texts) >= TOOLS_TEXTS:
                self._tools_texts.clear()
            text = self._tools_texts[key] = tools_text(tools)
        return text

    def _with_session_tools(self, state: SessionContext, request: GenerateRequest) -> GenerateRequest:
        """The step's system prompt with its tools section listing every tool the request carries: tools
        registered for the session alone (MCP servers') are added on ``agent/request``, after the prompt was
        rendered from the global ones, and the model should find them in the section like the built-in ones.
        The section is replaced in place (same position, so the prefix before it is unchanged); a section that
        the configuration replaced or removed is left as it is."""
        before = state.tools_section
        if not before or not request.tools or not request.system:
            return request
        after = self._tools_section(request.tools)
        if after == before or before not in request.system:
            return request
        return replace(request, system=request.system.replace(before, after, 1))

    def builtin_sections(self, assembly: PromptAssembly) -> list[PromptSection]:
        """The built-in sections for *assembly* (its tools, its agent's session)."""
        sections = [PromptSection("identity", ORDER["identity"], IDENTITY)]
        tools = self._tools_section(assembly.tools)
        sections.append(PromptSection("tools", ORDER["tools"], tools))
        agent = assembly.agent
        state = self._sessions.get(agent.session.id) if agent is not None else None
        if state is not None:
            state.tools_section = tools
        if agent is not None:
            mode = self.mode_of(agent.session.id)
            if mode is not None:
                sections.append(PromptSection("mode", ORDER["mode"], mode_text(mode)))
        if state is not None and state.environment is not None:
            sections.append(
                PromptSection("environment", ORDER["environment"], state.environment.render(state.git_summary))
            )
            if state.instructions.text:
                sections.append(PromptSection("instructions", ORDER["instructions"], state.instructions.text))
        return sections

    def apply_overrides(self, sections: list[PromptSection]) -> list[PromptSection]:
        """``system_prompt_sections``: ``false`` removes a section, a string replaces its text."""
        overrides = self.config.sections
        if not overrides:
            return sections
        out: list[PromptSection] = []
        seen: set[str] = set()
        for section in sections:
            seen.add(section.name)
            override = overrides.get(section.name)
            if override is False:
                continue
            if isinstance(override, str):
                section = PromptSection(section.name, section.order, override)
            out.append(section)
        for name, override in overrides.items():
            if name not in seen and isinstance(override, str):
                out.append(PromptSection(name, EXTRA_ORDER, override))
        return out

    async def on_assemble(
        self, assembly: PromptAssembly, next_: Next[PromptAssembly, PromptAssembly]
    ) -> PromptAssembly:
        """``system-prompt/assemble``: the built-in sections join the registered ones, then the overrides."""
        agent = assembly.agent
        state = self._sessions.get(agent.session.id) if agent is not None else None
        if state is not None:
            await self._await_git(state)
        assembly.sections = assembly.sections + self.builtin_sections(assembly)
        result = await next_(assembly)
        result.sections = sorted(self.apply_overrides(result.sections), key=lambda s: s.order)
        return result

    # -- the session log --------------------------------------------------------------------------------

    async def on_request(
        self,
        agent: Agent,
        turn: int,
        step: int,
        request: GenerateRequest,
        next_: Next[GenerateRequest, GenerateRequest],
    ) -> GenerateRequest:
        """Record which instruction files this session's prompt uses (once, and again when they change), and
        which model the step uses (after every other listener: the front end may switch it)."""
        state = self._sessions.get(agent.session.id)
        if state is not None and state.environment is not None:
            files = list(state.instructions.files)
            if state.recorded_files != files and (files or state.recorded_files is not None):
                state.recorded_files = files
                agent.session.append(
                    INSTRUCTIONS_EVENT, {"files": files, "truncated": list(state.instructions.truncated)}
                )
        request = await next_(request)
        if state is None:
            return request
        request = self._with_session_tools(state, request)
        state.model = request.model
        ratio = state.accounting.ratio_to_record()
        if ratio is not None:  # so a reload starts from this session's calibration, not from 1
            state.accounting.recorded_ratio = ratio
            agent.session.append(CALIBRATION_EVENT, {"ratio": round(ratio, 4)})
        request = await self._maybe_compact(agent, turn, state, request)
        for key, (_, owner, _) in list(self._inflight.items()):
            if owner is agent:
                del self._inflight[key]
        self._inflight[id(request)] = (request, agent, turn)
        return request

    # -- compaction -------------------------------------------------------------------------------------

    async def _maybe_compact(
        self, agent: Agent, turn: int, state: SessionContext, request: GenerateRequest
    ) -> GenerateRequest:
        """Prune, else compact, before the step when the request would pass the threshold: see :mod:`._pruning` and
        :mod:`._compaction`. The size is the provider's last count plus the calibrated estimate of what was added
        since (before any count: the calibrated estimate of the whole request). Notes the estimate of the request
        sent, which the step's usage calibrates."""
        settings = self.config.compaction
        window = self.window(request.model) if settings.enabled else None
        if window is None:
            return request
        accounting = state.accounting
        estimate = estimate_request(request.messages, request.system, request.tools)
        used = accounting.tokens()
        if used is None:
            used = accounting.calibrated(estimate)
        if used < settings.threshold * window or state.failed_turn == turn:
            accounting.sent_estimate = estimate
            return request
        if self._prune(agent, state, window, used):
            request = replace(request, messages=agent.session.derive_messages())
            estimate = estimate_request(request.messages, request.system, request.tools)
            used = accounting.tokens() or accounting.calibrated(estimate)
            if used <= PRUNE_TARGET * settings.threshold * window:
                accounting.sent_estimate = estimate
                return request
        try:
            data = await self.compact_session(
                agent,
                trigger="threshold",
                model=request.model,
                signal=request.signal,
                system=request.system,
                tools=request.tools,
                tokens_before=used,
                window=window,
            )
        except (AbortedError, anyio.get_cancelled_exc_class()):
            raise
        except Exception as error:
            state.failed_turn = turn
            from dsh.notices import Notice, post_notice  # rare: not loaded with the context plugin

            post_notice(  # the log line as before, and a notice for clients that show them
                self._ctx,
                Notice(
                    agent.session.id,
                    "warning",
                    "Compacting the conversation failed",
                    f"{error_message(error)} (about {used} of {window} tokens in use; dsh tries again next turn)",
                    source="context",
                ),
            )
            if used >= window:
                raise DshError(
                    f"the conversation (about {used} tokens) no longer fits the context window of {request.model} "
                    f"({window} tokens) and compacting it failed: {error_message(error)}",
                    "CONTEXT_WINDOW_EXCEEDED",
                ) from error
            accounting.sent_estimate = estimate
            return request
        if data is not None:
            request = replace(request, messages=agent.session.derive_messages())
            estimate = estimate_request(request.messages, request.system, request.tools)
        accounting.sent_estimate = estimate
        return request

    def _prune(self, agent: Agent, state: SessionContext, window: int, used: int) -> bool:
        """Append a ``context/prune`` when stubbing old tool results frees enough (see :mod:`._pruning`)."""
        settings = self.config.compaction
        if not settings.prune:
            return False
        ratio = state.accounting.ratio
        plan = plan_prune(
            agent.session.view(),
            protect=int(min(settings.prune_protect, window / 4) / ratio),
            minimum=int(min(settings.prune_minimum, window / 10) / ratio),
            pruned=state.pruned,
            spills=state.spills,
        )
        if plan is None:
            return False
        after = max(0, used - state.accounting.calibrated(plan.saved))
        data = {"results": plan.results, "trigger": "threshold", "tokens_before": used, "tokens_after": after}
        agent.session.append(PRUNE_EVENT, data)
        log.info("tool results pruned", session_id=agent.session.id, results=len(plan.results), tokens=after)
        return True

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
        """Summarise the session's older history now and append the ``context/compaction`` event; return its
        data, or None when there is nothing to summarise. Raises (history unchanged) when the summarisation
        fails or *signal* is aborted. *tail_budget*: estimated tokens the running turn's recent steps may keep
        (default: ``turn_tail`` of the window, calibrated)."""
        state = self._sessions.get(agent.session.id)
        if state is None:
            return None
        settings = self.config.compaction
        session = agent.session
        if manual:  # between turns: the compaction's own (empty) turn is not one to keep
            plan = plan_compaction(session, state.turn_starts[:-1], settings.keep_recent_turns, in_turn=False)
        else:
            size = window if window is not None else self.window(model)
            plan = plan_compaction(
                session,
                state.turn_starts,
                settings.keep_recent_turns,
                in_turn=state.in_turn,
                turn_start=state.turn_start,
                step_starts=state.step_starts,
                tail_budget=(
                    tail_budget
                    if tail_budget is not None
                    else int(settings.turn_tail * size / state.accounting.ratio)
                    if size
                    else None
                ),
            )
        if plan is None:
            return None
        summariser = settings.model or model
        summary = await summarise(self._ctx, build_summary_request(plan, summariser, signal, instructions))
        keep = set(plan.keep)
        kept = [message for seq, message in session.view() if seq >= plan.upto or seq in keep]
        after = state.accounting.calibrated(estimate_request([summary_message(summary), *kept], system, tools))
        data = compaction_data(
            plan,
            summary,
            trigger=trigger,
            model=summariser,
            tokens_before=tokens_before,
            tokens_after=after,
            window=window if window is not None else self.window(model),
            instructions=instructions,
        )
        session.append(COMPACTION_EVENT, data)
        log.info("conversation compacted", session_id=session.id, trigger=trigger, upto=plan.upto, tokens=after)
        return data

    async def on_compact(
        self,
        agent: Agent,
        turn: int,
        request: CompactRequest,
        next_: Next[CompactRequest, dict[str, Any] | None],
    ) -> dict[str, Any] | None:
        """``agent/compact`` (``agent.compact(instructions)``): summarise now, keeping ``keep_recent_turns``."""
        state = self._sessions.get(agent.session.id)
        model = (state.model if state is not None else None) or agent.options.model
        if state is None or not model:
            return await next_(request)
        return await self.compact_session(
            agent,
            trigger="manual",
            model=model,
            signal=request.signal,
            tokens_before=state.accounting.tokens(),
            instructions=request.instructions,
            manual=True,
        )

    # -- overflow: one compaction, one retry ------------------------------------------------------------

    async def on_stream(
        self, request: GenerateRequest, next_: Next[GenerateRequest, AsyncIterator[StreamChunk]]
    ) -> AsyncIterator[StreamChunk]:
        """``llm/stream``: an agent step the provider rejects as too long (before it streamed anything) is
        compacted and retried once. Only the first chunk is looked at here (the loop awaits this inside the step's
        cancel scope); the rest of the stream is handed back without a wrapper on the chunk path."""
        stream = await next_(request)
        entry = self._inflight.get(id(request))
        if entry is None or entry[0] is not request or not self.config.compaction.enabled:
            return stream
        overflow: Exception
        try:
            first = await anext(stream)
        except StopAsyncIteration:
            return stream
        except LlmError as error:
            if not is_overflow(error):
                raise
            overflow = error
        else:
            if not _is_overflow_finish(first):
                return _Resumed(first, stream)
            message = first["reason"].get("message") if first["type"] == "finish" else None
            overflow = DshError(message or "context window exceeded", "CONTEXT_WINDOW_EXCEEDED")
        await _aclose(stream)
        retry = await self._retry(request, entry[1], overflow)
        return _second_chance(retry, request.model)

    async def _retry(self, request: GenerateRequest, agent: Agent, overflow: Exception) -> AsyncIterator[StreamChunk]:
        said = error_message(overflow)
        try:
            data = await self.compact_session(
                agent,
                trigger="overflow",
                # the provider says it does not fit, whatever the window we know: keep at most the newest half
                tail_budget=estimate_request(request.messages) // 2,
                model=request.model,
                signal=request.signal,
                system=request.system,
                tools=request.tools,
            )
        except (AbortedError, anyio.get_cancelled_exc_class()):
            raise
        except Exception as error:
            raise DshError(
                f"the conversation does not fit the context window of {request.model} ({said}) and compacting it "
                f"failed: {error_message(error)}",
                "CONTEXT_WINDOW_EXCEEDED",
            ) from error
        if data is None:
            raise DshError(
                f"the conversation does not fit the context window of {request.model} ({said}) and there is no "
                "older history to compact",
                "CONTEXT_WINDOW_EXCEEDED",
            )
        retried = replace(request, messages=agent.session.derive_messages())
        state = self._sessions.get(agent.session.id)
        if state is not None:
            state.accounting.sent_estimate = estimate_request(retried.messages, retried.system, retried.tools)
        result: AsyncIterator[StreamChunk] = await self._ctx.llm.stream(retried)
        return result


OVERFLOW_MARKERS = ("context_length_exceeded", "prompt is too long", "maximum context length", "context window")


def is_overflow(error: BaseException) -> bool:
    """A provider's "the request is too long" (OpenAI ``context_length_exceeded``, Anthropic "prompt is too
    long", HTTP 413)."""
    code = error_code(error)
    if code in ("CONTEXT_WINDOW_EXCEEDED", "HTTP_413"):
        return True
    message = error_message(error).lower()
    return any(marker in message for marker in OVERFLOW_MARKERS)


def _is_overflow_finish(chunk: StreamChunk) -> bool:
    if chunk["type"] != "finish":
        return False
    reason = chunk["reason"]
    return reason["kind"] == "error" and (
        reason.get("code") == "CONTEXT_WINDOW_EXCEEDED"
        or any(marker in (reason.get("message") or "").lower() for marker in OVERFLOW_MARKERS)
    )


async def _aclose(stream: AsyncIterator[StreamChunk]) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        with anyio.CancelScope(shield=True):
            await aclose()


class _Resumed:
    """A stream whose first chunk was already read: that chunk, then the stream itself (one plain call per chunk,
    no generator frame on the chunk path)."""

    __slots__ = ("_first", "_rest")

    def __init__(self, first: StreamChunk, rest: AsyncIterator[StreamChunk]) -> None:
        self._first: StreamChunk | None = first
        self._rest = rest

    def __aiter__(self) -> _Resumed:
        return self

    def __anext__(self) -> Awaitable[StreamChunk]:
        first = self._first
        if first is not None:
            self._first = None
            return _ready(first)
        return self._rest.__anext__()

    async def aclose(self) -> None:
        await _aclose(self._rest)


async def _ready(chunk: StreamChunk) -> StreamChunk:
    return chunk


async def _second_chance(stream: AsyncIterator[StreamChunk], model: str) -> AsyncIterator[StreamChunk]:
    """The retried step's stream; a second overflow fails the turn with a message that says so."""
    try:
        async for chunk in stream:
            if _is_overflow_finish(chunk):
                raise DshError(
                    f"the conversation still does not fit the context window of {model} after compacting it",
                    "CONTEXT_WINDOW_EXCEEDED",
                )
            yield chunk
    except LlmError as error:
        if is_overflow(error):
            raise DshError(
                f"the conversation still does not fit the context window of {model} after compacting it "
                f"({error_message(error)})",
                "CONTEXT_WINDOW_EXCEEDED",
            ) from error
        raise
    finally:
        await _aclose(stream)


@plugin("context", inject=("system_prompt", "agents", "llm", "sessions"), config=ContextConfig)
def context_plugin(ctx: Context, config: ContextConfig) -> None:
    service = ContextService(ctx, config)
    ctx.on(ev.AGENT_CREATED, service.on_agent_created)
    ctx.on(ev.AGENT_DISPOSED, service.on_agent_disposed)
    ctx.on(ev.SESSION_EVENT, service.on_session_event)
    ctx.on(ev.SYSTEM_PROMPT_ASSEMBLE, service.on_assemble, prepend=True)
    ctx.on(ev.AGENT_REQUEST, service.on_request, prepend=True)
    ctx.on(ev.LLM_STREAM, service.on_stream)
    ctx.on(ev.AGENT_COMPACT, service.on_compact)
    ctx.provide("context", service)
