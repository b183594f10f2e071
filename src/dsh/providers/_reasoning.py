"""Reasoning effort ("thought level"): which models take it, and how a level reaches their requests.

Built in, by the provider's wire type and the model's name (without the provider prefix):

| type        | models                                                        | levels                 | request                                           |
|-------------|---------------------------------------------------------------|------------------------|---------------------------------------------------|
| ``openai``  | ``o1*``, ``o3*``, ``o4*``, ``gpt-5*``                          | low, medium, high      | ``reasoning_effort: <level>`` (Responses API: ``reasoning: {effort: <level>}``) |
| ``anthropic`` | ``claude-3-7-sonnet*``, ``claude-sonnet-4*``, ``claude-opus-4*``, ``claude-haiku-4-5*`` | off, low, medium, high | ``thinking: {type: enabled, budget_tokens}`` (off: none) |

A provider's ``thought_levels`` setting overrides the table per model (an empty list: no picker for that model).
Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dsh.providers._settings import ProviderSettings

__all__ = ["ANTHROPIC_BUDGETS", "ReasoningSupport"]

OPENAI_PREFIXES = ("o1", "o3", "o4", "gpt-5")
ANTHROPIC_PREFIXES = ("claude-3-7-sonnet", "claude-sonnet-4", "claude-opus-4", "claude-haiku-4-5")
ANTHROPIC_BUDGETS = {"low": 2048, "medium": 8192, "high": 24576}
ANSWER_ROOM = 4096
"""Tokens left for the answer above a thinking budget (Anthropic requires ``max_tokens`` > ``budget_tokens``)."""


@dataclass(frozen=True)
class ReasoningSupport:
    """One provider's reasoning-effort support (its settings decide the wire type and the overrides)."""

    settings: ProviderSettings
    provider: str = ""
    """The provider's name (which wire format a model uses depends on it)."""

    def levels(self, model: str) -> tuple[str, ...]:
        configured = self.settings.thought_levels.get(model)
        if configured is not None:
            return tuple(configured)
        if self.settings.type == "openai" and model.startswith(OPENAI_PREFIXES):
            return ("low", "medium", "high")
        if self.settings.type == "anthropic" and model.startswith(ANTHROPIC_PREFIXES):
            return ("off", "low", "medium", "high")
        return ()

    def extra(self, model: str, level: str) -> dict[str, Any]:
        """The request options for *level* (merged into the request body last)."""
        if self.settings.type == "openai":
            from dsh.providers.openai_responses import wire_format

            if wire_format(self.provider, self.settings, model) == "responses":
                return {"reasoning": {"effort": level}}
            return {"reasoning_effort": level}
        budget = ANTHROPIC_BUDGETS.get(level)
        if budget is None:
            return {}
        room = max(self.settings.max_tokens or 0, budget + ANSWER_ROOM)
        return {"thinking": {"type": "enabled", "budget_tokens": budget}, "max_tokens": room}
