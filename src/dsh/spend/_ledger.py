"""One session's spend against its budgets: pure bookkeeping, no I/O (the plugin feeds it and acts on it).

Guarantees: :meth:`Ledger.add` is O(1); turn figures count from the last :meth:`Ledger.start_turn`; session figures
count the whole log (a resumed session's log is walked once, at open). A step whose model has no known price adds
its tokens but no dollars, and names the model in :attr:`Ledger.unpriced`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dsh.spend._config import BUDGETS, DEFAULT_WARN_AT

if TYPE_CHECKING:
    from dsh.services.llm import Price, Usage

__all__ = ["Ledger", "Reached", "format_amount", "raise_hint"]


@dataclass(frozen=True, slots=True)
class Reached:
    """A budget at or past its limit: which one, its limit and what was spent."""

    budget: str
    limit: float
    spent: float

    def to_json(self) -> dict[str, Any]:
        return {"budget": self.budget, "limit": self.limit, "spent": round(self.spent, 6)}


def format_amount(budget: str, value: float) -> str:
    """``$1.2345`` for a dollar budget, ``12,345 tokens`` for a token one."""
    if budget.endswith("_usd"):
        return f"${value:,.4f}".rstrip("0").rstrip(".") if value else "$0"
    return f"{int(value):,} tokens"


def raise_hint(budget: str, limit: float) -> str:
    """How the user raises *budget*: the command with a doubled value."""
    doubled = limit * 2 if budget.endswith("_usd") else int(limit * 2)
    shown = f"{doubled:g}" if budget.endswith("_usd") else str(doubled)
    return f"/budget {budget} {shown} (or /budget {budget} off)"


@dataclass(slots=True)
class Ledger:
    """The figures of one top-level session (a sub-agent's spend is its parent's)."""

    defaults: dict[str, float] = field(default_factory=dict)
    """The configuration's budgets."""
    warn_at: float = DEFAULT_WARN_AT
    overrides: dict[str, float | None] = field(default_factory=dict)
    """``/budget`` settings of this session (None: no limit), stored in its log."""
    run: dict[str, float] = field(default_factory=dict)
    """Limits of this process only (``dsh exec --max-cost``): never stored."""
    session_usd: float = 0.0
    session_tokens: int = 0
    turn_usd: float = 0.0
    turn_tokens: int = 0
    turn: int | None = None
    model: str | None = None
    """The model of the step in flight (the last request's)."""
    unpriced: list[str] = field(default_factory=list)
    said: set[str] = field(default_factory=set)
    """What was said once already (``warn:<budget>``, ``unpriced:<model>``), stored in the log."""
    stopped: int | None = None
    """The turn a budget stopped (its ``spend/stop`` is in the log)."""
    _limits: dict[str, float] | None = None
    """:meth:`limits`, kept until a setting changes (it is read on every step)."""

    def set_override(self, name: str, value: float | None) -> None:
        """A ``/budget`` setting (``warn_at`` included); None: no limit for that budget."""
        self.overrides[name] = value
        self._limits = None

    def set_run(self, limits: dict[str, float]) -> None:
        """Limits of this process only (``dsh exec``)."""
        self.run.update(limits)
        self._limits = None

    def limits(self) -> dict[str, float]:
        """The budgets in force: the configuration's, then this session's settings, then this run's (do not change
        the returned dict)."""
        if self._limits is None:
            self._limits = self._merged()
        return self._limits

    def _merged(self) -> dict[str, float]:
        merged: dict[str, float] = dict(self.defaults)
        for name, value in self.overrides.items():
            if name == "warn_at":
                continue
            if value is None:
                merged.pop(name, None)
            else:
                merged[name] = value
        merged.update(self.run)
        return {name: merged[name] for name in BUDGETS if name in merged}

    def warn_fraction(self) -> float:
        value = self.overrides.get("warn_at")
        return value if value is not None else self.warn_at

    def start_turn(self, turn: int) -> None:
        self.turn = turn
        self.turn_usd = 0.0
        self.turn_tokens = 0

    def add(self, usage: Usage, price: Price | None, model: str | None) -> None:
        """One model call's *usage* (the session's own or a sub-agent's)."""
        tokens = int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0)
        self.session_tokens += tokens
        self.turn_tokens += tokens
        if price is not None:
            dollars = price.cost(usage)
            self.session_usd += dollars
            self.turn_usd += dollars
        elif model and model not in self.unpriced:
            self.unpriced.append(model)

    def spent(self, budget: str) -> float:
        value: float = getattr(self, budget)
        return value

    def reached(self) -> Reached | None:
        """The first budget (in :data:`BUDGETS` order) whose spend is at or past its limit."""
        for name, limit in self.limits().items():
            spent = self.spent(name)
            if spent >= limit:
                return Reached(name, limit, spent)
        return None

    def to_warn(self) -> list[Reached]:
        """Budgets past ``warn_at`` of their limit that were not warned about yet (not reached ones: the stop
        says those)."""
        fraction = self.warn_fraction()
        found = []
        for name, limit in self.limits().items():
            spent = self.spent(name)
            if f"warn:{name}" not in self.said and fraction * limit <= spent < limit:
                found.append(Reached(name, limit, spent))
        return found

    def figures(self) -> dict[str, dict[str, float]]:
        """``{budget: {limit, spent}}`` of the budgets in force (dollars rounded to 6 places)."""
        return {
            name: {"limit": limit, "spent": round(self.spent(name), 6) if name.endswith("_usd") else self.spent(name)}
            for name, limit in self.limits().items()
        }

    def describe(self) -> str:
        """One line: each budget in force as spent of limit, else what was spent."""
        limits = self.limits()
        if not limits:
            return (
                f"none set (this session: {format_amount('session_usd', self.session_usd)}, "
                f"{format_amount('session_tokens', self.session_tokens)})"
            )
        parts = [
            f"{name.replace('_', ' ')}: {format_amount(name, self.spent(name))} of {format_amount(name, limit)}"
            for name, limit in limits.items()
        ]
        return "; ".join(parts)
