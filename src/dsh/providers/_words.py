"""Word chunking shared by the offline models."""

from __future__ import annotations

import re
from collections.abc import Iterator

from dsh.services.llm import Message, estimate_tokens

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


def rough_tokens(messages: list[Message], system: str | None) -> int:
    """A deterministic stand-in for a token count: whitespace-separated words (cached per message and per
    request: see :mod:`dsh.services.llm._tokens`)."""
    return estimate_tokens(messages) + len((system or "").split())
