"""ACP prompt content → the model's content blocks.

Accepted: ``text``; ``resource_link`` (rendered into the text, so the model knows the user pointed at it);
``resource`` with text (embedded context, rendered with its uri); ``image``, and a ``resource`` whose blob is an
image, only when the session's model takes images, and only a PNG, JPEG, GIF or WebP image by its bytes (not
its declared type), at most :data:`~dsh.images.MAX_IMAGE_BYTES`, at most *max_images* per prompt (RFC 0022).
Everything else, another binary resource, and a prompt with no visible text are ``-32602`` with a message that
says what to change: a prompt must never be accepted and then hang, and a refused prompt stores nothing.

An image's base64 is replaced in *blocks* by its canonical spelling when the client's had slack (line breaks):
what the session stores and replays is then exactly what the model was sent.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from dsh.frontends.acp._rpc import INVALID_PARAMS, RpcError
from dsh.frontends.acp._wire import ImageContent, ResourceContent, ResourceLinkContent, TextContent
from dsh.images import DEFAULT_MAX_PER_PROMPT, ImageError, check_image, decode_base64, image_block
from dsh.services.llm import ContentBlock

__all__ = ["prompt_content"]


def _invalid(message: str, index: int | None = None, **data: Any) -> RpcError:
    return RpcError(INVALID_PARAMS, message, {"field": "prompt" if index is None else f"prompt[{index}]", **data})


class _Images:
    """The prompt's images so far: the model's permission and the count limit."""

    def __init__(self, accept: bool, model: str | None, limit: int) -> None:
        self.accept, self.model, self.limit, self.count = accept, model, limit, 0

    def block(self, raw: dict[str, Any], key: str, declared: str | None, index: int, name: str | None) -> ContentBlock:
        if not self.accept:
            named = f"model {self.model!r}" if self.model else "this session's model"
            data = {"model": self.model} if self.model else {}
            raise _invalid(
                f"{named} does not take images; pick a model that does, or send text (a model dsh does not know "
                "sees images can be marked so with vision in its provider's config)",
                index,
                **data,
            )
        self.count += 1
        if self.count > self.limit:
            raise _invalid(
                f"a prompt may carry at most {self.limit} images (images.max_per_prompt in the config file)", index
            )
        try:
            data_bytes, canonical = decode_base64(raw[key], f"prompt[{index}]")
            info = check_image(data_bytes, declared, f"prompt[{index}]")
        except ImageError as exc:
            raise _invalid(str(exc), index) from None
        if canonical is not raw[key]:
            raw[key] = canonical
        return image_block(canonical, info, len(data_bytes), name)


def prompt_content(
    blocks: list[dict[str, Any]],
    *,
    accept_images: bool,
    model: str | None = None,
    max_images: int = DEFAULT_MAX_PER_PROMPT,
) -> list[ContentBlock]:
    """The model's blocks for an ACP prompt (see the module docstring); *model* names the session's model in
    the error an image gets when it does not take images."""
    content: list[ContentBlock] = []
    images = _Images(accept_images, model, max_images)
    index = 0
    try:
        for index, raw in enumerate(blocks):
            kind = raw.get("type") if isinstance(raw, dict) else None
            if kind == "text":
                content.append({"type": "text", "text": TextContent.model_validate(raw).text})
            elif kind == "resource_link":
                link = ResourceLinkContent.model_validate(raw)
                rendered = f"\n[resource_link name={json.dumps(link.name)} uri={json.dumps(link.uri)}]\n"
                content.append({"type": "text", "text": rendered})
            elif kind == "resource":
                resource = ResourceContent.model_validate(raw).resource
                if resource.text is None:
                    declared = resource.mime_type
                    if resource.blob is None or (declared is not None and not declared.startswith("image/")):
                        raise _invalid(
                            "binary embedded resources are not supported unless they are images; send text or a "
                            "resource_link",
                            index,
                        )
                    content.append(images.block(raw["resource"], "blob", resource.mime_type, index, resource.uri))
                    continue
                rendered = f"\n<resource uri={json.dumps(resource.uri)}>\n{resource.text}\n</resource>\n"
                content.append({"type": "text", "text": rendered})
            elif kind == "image":
                image = ImageContent.model_validate(raw)
                content.append(images.block(raw, "data", image.mime_type, index, image.uri))
            else:
                raise _invalid(f"unsupported content block type {kind!r}", index)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_context=False, include_input=False)
        for error in errors:
            error["loc"] = ("prompt", index, *error["loc"])
        raise RpcError(
            INVALID_PARAMS, f"Invalid params: prompt[{index}] is not a valid content block", errors
        ) from None
    if not any(block["type"] == "image" or (block["type"] == "text" and block["text"].strip()) for block in content):
        raise _invalid("empty prompt: send some text")
    return content
