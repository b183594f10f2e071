"""Built-in context windows and prices of the well-known models of the built-in providers (OpenAI, Anthropic,
DeepSeek), so ``usage_update`` (and compaction) work without configuration.

Configuration wins: a provider's ``context_windows`` and ``prices`` (per model, in the config file) are published
as :class:`~dsh.services.llm.ModelInfo` and looked up first. A model is matched by its provider and the longest
table key its name starts with (``claude-sonnet-4-5-20250929`` → ``claude-sonnet-4-5``). Prices are US dollars per
million tokens as published by the providers (2026); they are estimates for display, never billing.
"""

from __future__ import annotations

from dsh.services.llm._service import Price

__all__ = ["BUILTIN_PRICES", "BUILTIN_WINDOWS", "builtin_price", "builtin_window"]

BUILTIN_WINDOWS: dict[str, dict[str, int]] = {
    "openai": {
        "gpt-5": 400_000,
        "gpt-4.1": 1_047_576,
        "gpt-4o": 128_000,
        "o3": 200_000,
        "o4-mini": 200_000,
        "o1": 200_000,
    },
    "anthropic": {"claude-": 200_000},
    "deepseek": {"deepseek-chat": 128_000, "deepseek-reasoner": 128_000},
}

BUILTIN_PRICES: dict[str, dict[str, Price]] = {
    "openai": {
        "gpt-5": Price(1.25, 10.0, cache_read=0.125),
        "gpt-5-mini": Price(0.25, 2.0, cache_read=0.025),
        "gpt-5-nano": Price(0.05, 0.40, cache_read=0.005),
        "gpt-4.1": Price(2.0, 8.0, cache_read=0.50),
        "gpt-4.1-mini": Price(0.40, 1.60, cache_read=0.10),
        "gpt-4.1-nano": Price(0.10, 0.40, cache_read=0.025),
        "gpt-4o": Price(2.50, 10.0, cache_read=1.25),
        "gpt-4o-mini": Price(0.15, 0.60, cache_read=0.075),
        "o3": Price(2.0, 8.0, cache_read=0.50),
        "o4-mini": Price(1.10, 4.40, cache_read=0.275),
    },
    "anthropic": {
        "claude-opus-4": Price(15.0, 75.0, cache_read=1.50, cache_write=18.75),
        "claude-sonnet-4": Price(3.0, 15.0, cache_read=0.30, cache_write=3.75),
        "claude-3-7-sonnet": Price(3.0, 15.0, cache_read=0.30, cache_write=3.75),
        "claude-haiku-4": Price(1.0, 5.0, cache_read=0.10, cache_write=1.25),
        "claude-3-5-haiku": Price(0.80, 4.0, cache_read=0.08, cache_write=1.0),
    },
    "deepseek": {
        "deepseek-chat": Price(0.28, 0.42, cache_read=0.028),
        "deepseek-reasoner": Price(0.28, 0.42, cache_read=0.028),
    },
}


def _lookup(table: dict[str, dict[str, object]], model: str) -> object | None:
    provider, _, name = model.partition(":")
    entries = table.get(provider)
    if not entries or not name:
        return None
    best = max((key for key in entries if name.startswith(key)), key=len, default=None)
    return entries[best] if best is not None else None


def builtin_window(model: str) -> int | None:
    found = _lookup(BUILTIN_WINDOWS, model)  # type: ignore[arg-type]
    return found if isinstance(found, int) else None


def builtin_price(model: str) -> Price | None:
    found = _lookup(BUILTIN_PRICES, model)  # type: ignore[arg-type]
    return found if isinstance(found, Price) else None
