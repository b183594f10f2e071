"""The ``images`` plugin: a model that does not take images never gets an image block.

Images reach a conversation from prompts (refused at the ACP door for such a model), tools (``read_file`` of an
image, MCP results) and history: a session that switched from a vision model to one without vision still holds
its earlier images. On ``llm/stream`` (every model call: agent steps, compaction summaries, one-shot calls), a
request for a model that does not take images (:meth:`~dsh.services.llm.LlmService.takes_images`) gets each
image block replaced by a text note with its description: the model learns an image was there and what it was,
and the provider never answers 400 for an image it cannot read. Requests for vision models pass untouched (no
walk of the history).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from dsh import events as ev
from dsh.images._blocks import describe_image
from dsh.kernel import Next, plugin

if TYPE_CHECKING:
    from dsh.kernel import Context
    from dsh.services.llm import ContentBlock, GenerateRequest, Message, StreamChunk

__all__ = ["images_plugin", "without_images"]


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


@plugin("images", inject=("llm",))
def images_plugin(ctx: Context, config: object) -> None:
    async def on_stream(
        request: GenerateRequest, next_: Next[GenerateRequest, AsyncIterator[StreamChunk]]
    ) -> AsyncIterator[StreamChunk]:
        if not ctx.llm.takes_images(request.model):
            messages = without_images(request.messages, request.model)
            if messages is not None:
                request = replace(request, messages=messages)
        return await next_(request)

    ctx.on(ev.LLM_STREAM, on_stream)
