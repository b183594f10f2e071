"""A rough, deterministic token estimate of a conversation, cached so a request costs O(1) to estimate.

The estimate is the offline models' stand-in for a tokenizer: the whitespace-separated words of a message's
text (text blocks and tool results' text, concatenated). It is cached twice, so a step's estimate does not
grow with the session:

* per message, on the messages a session derives (each derived once from one event; see
  :meth:`~dsh.services.sessions.Session.derive_messages`), which carry their count in ``tokens``;
* per request, on the :class:`MessageList` a session hands out, which carries the running total of the
  messages it was built from. Any change to that list drops the total (the next estimate sums the messages'
  cached counts); a list a plugin builds itself is summed the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from dsh.services.llm._types import Message

__all__ = ["MessageList", "estimate_tokens", "message_tokens", "text_tokens"]


def text_tokens(message: Message) -> int:
    """The estimate for one message, computed (never cached)."""
    parts: list[str] = []
    for block in message["content"]:
        if block["type"] == "text":
            parts.append(block["text"])
        elif block["type"] == "tool-result":
            parts.extend(b["text"] for b in block["content"] if b["type"] == "text")
    return len("".join(parts).split())


def message_tokens(message: Message) -> int:
    """The estimate for one message: its cached ``tokens`` when it is a derived message, else computed."""
    cached = getattr(message, "tokens", None)
    return cached if type(cached) is int else text_tokens(message)


def estimate_tokens(messages: Sequence[Message]) -> int:
    """The estimate for a conversation: O(1) for an unchanged :class:`MessageList`, else a sum."""
    cached = messages.tokens if type(messages) is MessageList else None
    if cached is not None:
        return cached
    return sum(message_tokens(m) for m in messages)


def _changed(method_name: str) -> Any:
    base = getattr(list, method_name)

    def method(self: MessageList, *args: Any, **kwargs: Any) -> Any:
        self.tokens = None
        return base(self, *args, **kwargs)

    method.__name__ = method_name
    return method


class MessageList(list[Message]):
    """A request's own list of (shared, read-only) messages, with the estimate of what it holds.

    The list is the request's: a plugin may append, insert, remove or replace messages in it; every such change
    drops :attr:`tokens`. The messages themselves are shared with the session's cache and read-only."""

    __slots__ = ("tokens",)

    def __init__(self, messages: Iterable[Message] = (), tokens: int | None = None) -> None:
        super().__init__(messages)
        self.tokens: int | None = tokens
        """The estimate of exactly these messages, or None once the list was changed."""

    __setitem__ = _changed("__setitem__")
    __delitem__ = _changed("__delitem__")
    __iadd__ = _changed("__iadd__")
    __imul__ = _changed("__imul__")
    append = _changed("append")
    extend = _changed("extend")
    insert = _changed("insert")
    pop = _changed("pop")
    remove = _changed("remove")
    clear = _changed("clear")
    sort = _changed("sort")
    reverse = _changed("reverse")

    def __copy__(self) -> MessageList:
        return MessageList(self, self.tokens)

    def __reduce__(self) -> Any:
        # deepcopy and pickle: a plain list (deep copies of the messages are plain, mutable dicts)
        return (list, (list(self),))
