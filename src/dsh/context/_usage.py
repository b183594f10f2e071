"""The ACP ``usage_update`` payload, built in one place (the context plugin, the ACP front end's fallback without
it, and the projection of a compaction all send it)."""

from __future__ import annotations

from typing import Any

__all__ = ["usage_update"]


def usage_update(
    used: int | None, size: int | None, *, cost: float | None = None, cache_read: int = 0, cache_write: int = 0
) -> dict[str, Any] | None:
    """``{sessionUpdate: usage_update, used, size}`` (with ``cost`` in USD, rounded to 4 decimals so no encoder
    writes an exponent, and the cache figures under ``_meta.dsh``); None when *used* or *size* is unknown or
    *used* is not positive (``size`` is required, and a made-up window would be worse than none)."""
    if not isinstance(used, int) or not isinstance(size, int) or used <= 0:
        return None
    update: dict[str, Any] = {"sessionUpdate": "usage_update", "used": used, "size": size}
    if cost is not None:
        update["cost"] = {"amount": round(cost, 4), "currency": "USD"}
    if cache_read or cache_write:
        update["_meta"] = {"dsh": {"cacheReadTokens": cache_read, "cacheWriteTokens": cache_write}}
    return update
