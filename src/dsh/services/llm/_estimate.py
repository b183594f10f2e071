"""The one token estimate dsh makes: characters / 4 over what a request carries.

There is no tokenizer (nothing is downloaded at run time). The estimate is used for two things only, and both
stay honest because of how they are used:

* context decisions (when to prune or compact), where the context plugin multiplies it by the session's
  calibration ratio (provider-reported input tokens / this estimate of the same request), so the decision
  follows the provider's own count after the first response;
* the offline models' (``echo``, ``scripted``) reported usage: they count what they are sent, once per call,
  with this same function, so their figures are in the unit the context plugin reasons in.

Guarantee: a pure function of the request's content (deterministic, no caching on shared messages); cost linear
in the request's size.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from dsh.services.llm._types import Message

__all__ = [
    "CHARS_PER_TOKEN",
    "MESSAGE_OVERHEAD",
    "content_chars",
    "estimate_chars",
    "estimate_request",
    "tools_chars",
]

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD = 4
"""Tokens a provider spends per message on roles and separators (estimate)."""


def _image_tokens(block: dict[str, Any]) -> int:
    """An image's tokens from its ``width`` and ``height`` (:func:`dsh.images.image_tokens`; a block that does not
    say its pixel size, dsh's own always do, costs :data:`dsh.images._blocks.TYPICAL_IMAGE_TOKENS`, the one constant)."""
    from dsh.images import image_tokens

    width, height = block.get("width"), block.get("height")
    if type(width) is not int or type(height) is not int:
        return image_tokens(None, None)
    return image_tokens(width, height)


def content_chars(blocks: Iterable[Any]) -> int:
    """Characters of the content blocks that reach a model (text, reasoning, tool calls and results; an image
    counts the tokens its pixel size costs, :data:`dsh.images._blocks.TYPICAL_IMAGE_TOKENS` when it does not say)."""
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
        elif kind == "image":  # by its pixel size, the providers' rule of thumb (RFC 0022)
            total += _image_tokens(block) * CHARS_PER_TOKEN
    return total


def estimate_chars(chars: int) -> int:
    """Tokens for *chars* characters (rounded up)."""
    return -(-chars // CHARS_PER_TOKEN)


def tools_chars(tools: Any) -> int:
    """Characters of the tool schemas (their JSON)."""
    if not tools:
        return 0
    try:
        return len(orjson.dumps(tools))
    except TypeError:
        return len(repr(tools))


def estimate_request(messages: Iterable[Message], system: str | None = None, tools: Any = None) -> int:
    """A whole request's prompt tokens, estimated: system, tool schemas and messages."""
    chars = len(system or "") + tools_chars(tools)
    count = 0
    for message in messages:
        chars += content_chars(message["content"])
        count += 1
    return estimate_chars(chars) + count * MESSAGE_OVERHEAD
