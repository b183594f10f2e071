"""Compaction and pruning: before a step whose request would pass the threshold, old tool results are stubbed
(``context/prune``, :mod:`._pruning`) and, when that is not enough, the older history is summarised
(``context/compaction``, :mod:`._compaction`); ``agent/compact`` summarises on demand.

Guarantees: a failed summarisation leaves the history unchanged (a threshold compaction is not retried before
the next turn; past the window the turn fails with ``CONTEXT_WINDOW_EXCEEDED``); cancellation propagates.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

import anyio

from dsh._log import get_logger
from dsh.context._compaction import build_summary_request, compaction_data, plan_compaction, summarise
from dsh.context._config import ContextConfig
from dsh.context._costs import ContextAccounting
from dsh.context._pruning import plan_prune
from dsh.context._state import SessionContext, SessionStates
from dsh.errors import DshError, error_message
from dsh.kernel import AbortedError
from dsh.services.llm import estimate_request
from dsh.services.sessions import COMPACTION_EVENT, PRUNE_EVENT, summary_message

if TYPE_CHECKING:
    from dsh.kernel import CancelToken, Context, Next
    from dsh.services.agents import Agent, CompactRequest
    from dsh.services.llm import GenerateRequest, ToolSchema

__all__ = ["PRUNE_TARGET", "Compactor"]

log = get_logger("dsh.context")
PRUNE_TARGET = 0.75
"""A prune alone is enough when it brings the request under this fraction of the threshold; otherwise the
history is summarised too (a prune that leaves the request just under the threshold would be followed by
another cache-breaking change a step later)."""


class Compactor:
    """Prune and compact a session's history (before a step, on overflow, on demand)."""

    def __init__(
        self, ctx: Context, config: ContextConfig, sessions: SessionStates, accounting: ContextAccounting
    ) -> None:
        self._ctx = ctx
        self.config = config
        self._sessions = sessions
        self._accounting = accounting

    async def maybe_compact(
        self, agent: Agent, turn: int, state: SessionContext, request: GenerateRequest
    ) -> GenerateRequest:
        """Prune, else compact, before the step when the request would pass the threshold: see :mod:`._pruning` and
        :mod:`._compaction`. The size is the provider's last count plus the calibrated estimate of what was added
        since (before any count: the calibrated estimate of the whole request). Notes the estimate of the request
        sent, which the step's usage calibrates."""
        settings = self.config.compaction
        window = self._accounting.window(request.model) if settings.enabled else None
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
        if self.prune(agent, state, window, used):
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

    def prune(self, agent: Agent, state: SessionContext, window: int, used: int) -> bool:
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
            size = window if window is not None else self._accounting.window(model)
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
            window=window if window is not None else self._accounting.window(model),
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
