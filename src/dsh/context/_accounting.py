"""Context accounting: how many tokens a session's context holds now, what it has cost, and how far the one
estimate (:func:`dsh.services.llm.estimate_request`, characters / 4) is from the provider's own count.

Calibration: when the plugin sends a step it notes the estimate of that request (:attr:`Accounting.sent_estimate`);
when the step's ``usage`` comes back, ``ratio = reported input tokens / that estimate`` (clamped to
[:data:`MIN_RATIO`, :data:`MAX_RATIO`]). Every later estimate is multiplied by it, so a decision taken on "80 % of the
window" is taken on the provider's count, not on a guess (a model whose tokenizer counts 1.5 times our estimate
compacts when its own count reaches the threshold). Before any response the ratio is the last one recorded in
the log (``context/calibration``), else 1.

Tokens in use (what ``usage_update`` shows) = the last step's reported prompt + completion tokens, plus the
calibrated estimate of what was added to the conversation since; with no report yet, None (the caller estimates
the whole request).

Guarantees: updated from ``session/event`` in O(size of the event); never walks the log on the per-step path
(a resumed session's log is walked once, when it is opened).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsh.services.llm import MESSAGE_OVERHEAD, content_chars, estimate_chars

if TYPE_CHECKING:
    from dsh.services.llm import Price, Usage
    from dsh.services.sessions import SessionEvent

__all__ = ["CALIBRATION_EVENT", "MAX_RATIO", "MIN_RATIO", "Accounting"]

CALIBRATION_EVENT = "context/calibration"
MIN_RATIO = 0.25
MAX_RATIO = 4.0
RECORD_DRIFT = 0.05
"""A ratio is recorded in the log again only when it moved by more than this fraction since the last record."""
_COUNTED = frozenset({"user/message", "assistant/message", "tool/result", "context/message", "steering/message"})


@dataclass(slots=True)
class Accounting:
    """One session's figures (see the module docstring)."""

    reported: int | None = None
    """The last step's prompt + completion tokens, as the provider reported them."""
    added_chars: int = 0
    """Characters added to the conversation since that report."""
    added_messages: int = 0
    cost: float = 0.0
    """Cumulative cost in US dollars of the steps whose model has a known price."""
    priced: bool = False
    cache_read: int = 0
    cache_write: int = 0
    """The last step's prompt-cache reads and writes (tokens)."""
    ratio: float = 1.0
    """Provider-reported input tokens / the estimate of the same request (the last response's)."""
    sent_estimate: int | None = None
    """The estimate of the step request in flight (set when it is sent, consumed by its usage)."""
    recorded_ratio: float | None = None
    """The ratio last written to the log as ``context/calibration``."""

    def calibrated(self, estimate: int) -> int:
        """*estimate* in the provider's count (the session's ratio applied)."""
        return math.ceil(estimate * self.ratio)

    def tokens(self) -> int | None:
        """Tokens in use now; None when nothing was reported yet (the caller estimates the whole request)."""
        if self.reported is None:
            return None
        return self.reported + self.calibrated(
            estimate_chars(self.added_chars) + self.added_messages * MESSAGE_OVERHEAD
        )

    def on_usage(self, usage: Usage, price: Price | None) -> None:
        reported_in = int(usage.get("input_tokens") or 0)
        self.reported = reported_in + int(usage.get("output_tokens") or 0)
        self.added_chars = 0
        self.added_messages = 0
        self.cache_read = int(usage.get("cache_read_tokens") or 0)
        self.cache_write = int(usage.get("cache_write_tokens") or 0)
        if self.sent_estimate and reported_in > 0:
            self.ratio = min(MAX_RATIO, max(MIN_RATIO, reported_in / self.sent_estimate))
        self.sent_estimate = None
        if price is not None:
            self.cost += price.cost(usage)
            self.priced = True

    def on_event(self, event: SessionEvent) -> None:
        """Count what *event* adds to the conversation (usage is handled by :meth:`on_usage`)."""
        if event.type in _COUNTED:
            self.added_chars += content_chars(event.data.get("content") or [])
            self.added_messages += 1

    def on_calibration(self, ratio: object) -> None:
        """A ``context/calibration`` event (replayed at open): the ratio the session last recorded."""
        if isinstance(ratio, int | float) and MIN_RATIO <= ratio <= MAX_RATIO:
            self.ratio = self.recorded_ratio = float(ratio)

    def ratio_to_record(self) -> float | None:
        """The ratio to write to the log now, or None when the recorded one is still close enough."""
        recorded = self.recorded_ratio
        if recorded is None:
            return self.ratio if self.ratio != 1.0 else None
        return self.ratio if abs(self.ratio - recorded) > RECORD_DRIFT * recorded else None

    def reset(self, tokens: int) -> None:
        """After a compaction or a prune: the context is now about *tokens* (calibrated; an estimate until the
        next report)."""
        self.reported = tokens
        self.added_chars = 0
        self.added_messages = 0
