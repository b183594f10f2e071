"""Word chunking shared by the offline models."""

from __future__ import annotations

import re

from dsh.services.llm import Message, estimate_tokens

_WORD = re.compile(r"\s*\S+\s*|\s+")


def words(text: str) -> list[str]:
    """Split *text* into word pieces that keep their whitespace: ``"".join(words(t)) == t``."""
    return _WORD.findall(text)


def message_text(message: Message) -> str:
    """The text a message carries, tool results included (for the offline models)."""
    parts: list[str] = []
    for block in message["content"]:
        if block["type"] == "text":
            parts.append(block["text"])
        elif block["type"] == "tool-result":
            parts.extend(b["text"] for b in block["content"] if b["type"] == "text")
    return "".join(parts)


def rough_tokens(messages: list[Message], system: str | None) -> int:
    """A deterministic stand-in for a token count: whitespace-separated words (cached per message and per
    request: see :mod:`dsh.services.llm._tokens`)."""
    return estimate_tokens(messages) + len((system or "").split())
