"""Context accounting: how many tokens a session's context holds now, and what it has cost.

Tokens in use = the last step's provider-reported prompt + completion tokens, plus an estimate of what was added
to the conversation since (tool results, new user messages); with no report yet, an estimate of the whole
conversation. The estimate is characters / 4 (no tokenizer, nothing downloaded at run time): cheap, and close
enough to decide when to compact, which is all it is used for.

Guarantees: updated from ``session/event`` in O(size of the event); never walks the log on the per-step path
(a resumed session's log is walked once, when it is opened).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable

    from dsh.services.llm import Message, Price, Usage
    from dsh.services.sessions import SessionEvent

__all__ = ["CHARS_PER_TOKEN", "Accounting", "content_chars", "estimate_messages", "estimate_tokens"]

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD = 4
"""Tokens a provider spends per message on roles and separators (estimate)."""
_COUNTED = frozenset({"user/message", "assistant/message", "tool/result", "context/message", "steering/message"})


def content_chars(blocks: Iterable[Any]) -> int:
    total = 0
    for block in blocks:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind in ("text", "reasoning"):
            total += len(block.get("text") or "")
        elif kind == "tool-call":
            total += len(block.get("name") or "") + len(block.get("arguments") or "")
        elif kind == "tool-result":
            total += content_chars(block.get("content") or [])
        elif kind == "image":
            total += 1000 * CHARS_PER_TOKEN  # a typical image costs ~1,000 tokens
    return total


def estimate_tokens(chars: int) -> int:
    return -(-chars // CHARS_PER_TOKEN)


def estimate_messages(messages: Iterable[Message], system: str | None = None, tools: Any = None) -> int:
    """A whole request's prompt tokens, estimated."""
    chars = len(system or "") + (len(repr(tools)) if tools else 0)
    count = 0
    for message in messages:
        chars += content_chars(message["content"])
        count += 1
    return estimate_tokens(chars) + count * MESSAGE_OVERHEAD


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

    def tokens(self) -> int | None:
        """Tokens in use now; None when nothing was reported yet (the caller estimates the whole request)."""
        if self.reported is None:
            return None
        return self.reported + estimate_tokens(self.added_chars) + self.added_messages * MESSAGE_OVERHEAD

    def on_usage(self, usage: Usage, price: Price | None) -> None:
        self.reported = int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0)
        self.added_chars = 0
        self.added_messages = 0
        self.cache_read = int(usage.get("cache_read_tokens") or 0)
        self.cache_write = int(usage.get("cache_write_tokens") or 0)
        if price is not None:
            self.cost += price.cost(usage)
            self.priced = True

    def on_event(self, event: SessionEvent) -> None:
        """Count what *event* adds to the conversation (usage is handled by :meth:`on_usage`)."""
        if event.type in _COUNTED:
            self.added_chars += content_chars(event.data.get("content") or [])
            self.added_messages += 1

    def reset(self, tokens: int) -> None:
        """After a compaction: the context is now about *tokens* (an estimate until the next report)."""
        self.reported = tokens
        self.added_chars = 0
        self.added_messages = 0
