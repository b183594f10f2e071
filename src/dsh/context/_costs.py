"""Accounting and cost: each session's figures (tokens in use, cost, cache reads and writes) kept current from
its log, the models' windows and prices, and the ACP ``usage_update``.

Guarantees: a resumed session's log is walked once, at open; afterwards each ``session/event`` costs O(size of
the event), and text chunks count for nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from dsh.context._accounting import CALIBRATION_EVENT
from dsh.context._state import INSTRUCTIONS_EVENT, SessionContext, SessionStates
from dsh.context._usage import usage_update
from dsh.services.llm import builtin_price, builtin_window
from dsh.services.sessions import COMPACTION_EVENT, PRUNE_EVENT, ignores_text_chunks

if TYPE_CHECKING:
    from dsh.kernel import Context
    from dsh.services.llm import Price, Usage
    from dsh.services.sessions import Session, SessionEvent

__all__ = ["ContextAccounting"]


class ContextAccounting:
    """The sessions' figures and the models' windows and prices."""

    def __init__(self, ctx: Context, sessions: SessionStates) -> None:
        self._ctx = ctx
        self._sessions = sessions

    def replay(self, state: SessionContext, session: Session) -> None:
        """A resumed session's figures: its log walked once, at open (never on the per-step path)."""
        price = self.price(state.model) if state.model else None
        for event in session.events_without_chunks():  # as live (on_session_event): chunks count for nothing
            self.account(state, event, price)
            if event.type == INSTRUCTIONS_EVENT:
                state.recorded_files = list(event.data.get("files") or [])

    def account(self, state: SessionContext, event: SessionEvent, price: Price | None) -> None:
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
            self.account(state, event, self.price(state.model) if event.type == "usage" and state.model else None)

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
