"""Word chunking shared by the offline models."""

from __future__ import annotations

import operator
import re
from collections.abc import Iterator
from typing import cast

from dsh.services.llm import MESSAGE_OVERHEAD, GenerateRequest, Message, content_chars, estimate_chars, tools_chars

_WORD = re.compile(r"\s*\S+\s*|\s+")


_TO_NEXT_WORD = re.compile(r"\s*\S+\s+")
WORD_BLOCK = 65_536
"""Characters split per block by :func:`word_blocks`."""


def words(text: str) -> list[str]:
    """Split *text* into word pieces that keep their whitespace: ``"".join(words(t)) == t``."""
    return _WORD.findall(text)


def word_blocks(text: str, block: int = WORD_BLOCK) -> Iterator[list[str]]:
    """:func:`words` of *text*, a block of about *block* characters at a time: the same pieces, in order.

    A model echoing a 16 MB prompt must not build a list of two million pieces before its first chunk (the
    time to split it all, and a list every collection of the cyclic GC then walks while the reply streams).
    Blocks end where a piece ends: after the whitespace that follows a word, before the next word."""
    size, start = len(text), 0
    while start < size:
        end = start + block
        if end >= size:
            end = size
        else:
            boundary = _TO_NEXT_WORD.match(text, end)
            end = boundary.end() if boundary is not None else size
        yield _WORD.findall(text, start, end)
        start = end


def message_text(message: Message) -> str:
    """The text a message carries, tool results included (for the offline models)."""
    parts: list[str] = []
    for block in message["content"]:
        if block["type"] == "text":
            parts.append(block["text"])
        elif block["type"] == "tool-result":
            parts.extend(b["text"] for b in block["content"] if b["type"] == "text")
    return "".join(parts)


class RequestCounter:
    """What an offline model reports as its input tokens: :func:`~dsh.services.llm.estimate_request` of the request
    it is sent (the one estimate), each message counted once.

    A conversation is sent again at every step with one or two messages more, and the messages are the session's
    shared, read-only objects; counting every message of every request would make a step cost grow with the
    session. So the characters of each message are kept by its identity (the entry holds the message, so the
    identity cannot be reused while it is cached); a request costs C-level lookups plus the new messages. A
    message replaced in the view (a prune's stub, a compaction's summary) is a new object and is counted anew.
    At most :data:`COUNTED` messages are kept (then the cache starts again)."""

    __slots__ = ("_chars",)

    COUNTED = 200_000

    def __init__(self) -> None:
        self._chars: dict[int, tuple[Message, int]] = {}

    def __call__(self, request: GenerateRequest) -> int:
        messages = request.messages
        cache = self._chars
        entries = list(map(cache.get, map(id, messages)))
        if None in entries:
            if len(cache) + len(entries) > self.COUNTED:
                cache.clear()
            for index in range(entries.index(None), len(entries)):
                if entries[index] is None:
                    message = messages[index]
                    entries[index] = cache[id(message)] = (message, content_chars(message["content"]))
        counted = cast("list[tuple[Message, int]]", entries)  # every entry is filled now
        chars = sum(map(_CHARS, counted)) + len(request.system or "") + tools_chars(request.tools)
        return estimate_chars(chars) + len(entries) * MESSAGE_OVERHEAD


_CHARS = operator.itemgetter(1)
