"""ACP prompt content → the model's content blocks.

Accepted: ``text``; ``resource_link`` (rendered into the text, so the model knows the user pointed at it);
``resource`` with text (embedded context, rendered with its uri); ``image`` only when the model accepts
images. Everything else, a binary resource, and a prompt with no visible text are ``-32602`` with a message
that says what to change: a prompt must never be accepted and then hang.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from dsh.frontends.acp._rpc import INVALID_PARAMS, RpcError
from dsh.frontends.acp._wire import ImageContent, ResourceContent, ResourceLinkContent, TextContent
from dsh.services.llm import ContentBlock

__all__ = ["prompt_content"]


def _invalid(message: str, index: int | None = None) -> RpcError:
    data = {"field": "prompt" if index is None else f"prompt[{index}]"}
    return RpcError(INVALID_PARAMS, message, data)


def prompt_content(blocks: list[dict[str, Any]], *, accept_images: bool) -> list[ContentBlock]:
    content: list[ContentBlock] = []
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
                    raise _invalid("binary embedded resources are not supported; send text or a resource_link", index)
                rendered = f"\n<resource uri={json.dumps(resource.uri)}>\n{resource.text}\n</resource>\n"
                content.append({"type": "text", "text": rendered})
            elif kind == "image":
                image = ImageContent.model_validate(raw)
                if not accept_images:
                    raise _invalid("this session's model does not accept images; send text instead", index)
                content.append({"type": "image", "url": f"data:{image.mime_type};base64,{image.data}"})
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
