"""Word chunking shared by the offline models."""

from __future__ import annotations

import re
from collections.abc import Iterator

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
    """The text a message carries, tool results included (for the offline models); an image is ``[image: its
    description]`` (:func:`dsh.images.describe_image`), so the offline models show that they saw it."""
    from dsh.images import describe_image

    parts: list[str] = []
    for block in message["content"]:
        if block["type"] == "text":
            parts.append(block["text"])
        elif block["type"] == "image":
            parts.append(f"[image: {describe_image(block)}]")
        elif block["type"] == "tool-result":
            for inner in block["content"]:
                if inner["type"] == "text":
                    parts.append(inner["text"])
                elif inner["type"] == "image":
                    parts.append(f"[image: {describe_image(inner)}]")
    return "".join(parts)


class RequestCounter:
    """What an offline model reports as its input tokens: :func:`~dsh.services.llm.estimate_request` of the request
    it is sent (the one estimate), each message counted once.

    A conversation is sent again at every step with a message or two more, and its messages are the session's
    shared, read-only objects; counting every message of every request would make a step cost grow with the
    session. So the counter keeps, per conversation (keyed by its first message), the messages it last saw and
    their characters: when a request starts with exactly those messages (one C-level list comparison, identity
    first), only the new ones are counted. Anything else (a compaction's summary, a prune's stub, a plugin's
    rewrite) is counted in full, so the figure is always exact. At most :data:`CONVERSATIONS` are kept."""

    __slots__ = ("_seen",)

    CONVERSATIONS = 64

    def __init__(self) -> None:
        self._seen: dict[int, tuple[Message, list[Message], int]] = {}

    def __call__(self, request: GenerateRequest) -> int:
        messages = request.messages
        chars = 0
        if messages:
            first = messages[0]
            seen = self._seen.get(id(first))
            counted = None
            if seen is not None and seen[0] is first:
                _, previous, previous_chars = seen
                known = len(previous)
                if len(messages) >= known and messages[:known] == previous:
                    counted = previous_chars + sum(content_chars(m["content"]) for m in messages[known:])
            if counted is None:
                counted = sum(content_chars(m["content"]) for m in messages)
            if seen is None and len(self._seen) >= self.CONVERSATIONS:
                self._seen.clear()
            self._seen[id(first)] = (first, list(messages), counted)  # the entry keeps *first*: its id stays its own
            chars = counted
        chars += len(request.system or "") + tools_chars(request.tools)
        return estimate_chars(chars) + len(messages) * MESSAGE_OVERHEAD
