"""``budget:`` in the configuration file: the spend limits every session starts with (RFC 0039)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["BUDGETS", "DEFAULT_WARN_AT", "SpendConfig"]

BUDGETS = ("turn_usd", "session_usd", "turn_tokens", "session_tokens")
"""The four spend budgets, in the order they are checked (the first one reached is the one reported)."""
DEFAULT_WARN_AT = 0.8


class SpendConfig(BaseModel):
    """``turn_usd`` / ``session_usd``: US dollars one turn / the whole session may spend (sub-agents included);
    ``turn_tokens`` / ``session_tokens``: the same in tokens (every model call's input plus output tokens);
    ``warn_at``: the fraction of a budget at which the user is warned once (default 0.8). Absent: no limit."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    turn_usd: float | None = Field(default=None, gt=0)
    session_usd: float | None = Field(default=None, gt=0)
    turn_tokens: int | None = Field(default=None, gt=0)
    session_tokens: int | None = Field(default=None, gt=0)
    warn_at: float = Field(default=DEFAULT_WARN_AT, gt=0, le=1)

    def limits(self) -> dict[str, float]:
        """The budgets that are set, by name."""
        return {name: float(value) for name in BUDGETS if (value := getattr(self, name)) is not None}
