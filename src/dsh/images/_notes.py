"""A model that does not take images never gets an image block: :func:`without_images`.

Images reach a conversation from prompts (refused at the ACP door for such a model), tools (``read_file`` of an
image, MCP results) and history: a session that switched from a vision model to one without vision still holds
its earlier images. The ``llm`` service calls this right before the adapter, after every ``llm/stream``
listener, for a request whose model does not take images: each image block becomes a text note with its
description, so the model learns an image was there and what it was, and the provider never answers 400 for an
image it cannot read. Requests for vision models are not walked at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from dsh.images._blocks import describe_image

if TYPE_CHECKING:
    from dsh.services.llm import ContentBlock, Message

__all__ = ["without_images"]


def _note(block: Any, model: str) -> ContentBlock:
    return {"type": "text", "text": f"[image: {describe_image(block)}; not shown: {model} does not take images]"}


def _blocks(blocks: list[Any], model: str) -> list[Any] | None:
    """*blocks* with images as notes (also inside tool results); None when there is none."""
    out: list[Any] | None = None
    for index, block in enumerate(blocks):
        kind = block.get("type") if isinstance(block, dict) else None
        new = block
        if kind == "image":
            new = _note(block, model)
        elif kind == "tool-result":
            inner = _blocks(list(block.get("content") or []), model)
            if inner is not None:
                new = {**block, "content": inner}
        if new is not block:
            if out is None:
                out = list(blocks[:index])
            out.append(new)
        elif out is not None:
            out.append(block)
    return out


def without_images(messages: list[Message], model: str) -> list[Message] | None:
    """The conversation with every image replaced by a note naming *model*; None when it holds no image."""
    out: list[Message] | None = None
    for index, message in enumerate(messages):
        content = _blocks(list(message["content"]), model)
        if content is not None and out is None:
            out = list(messages[:index])
        if out is not None:
            out.append(cast("Message", {**message, "content": content}) if content is not None else message)
    return out
