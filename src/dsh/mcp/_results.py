"""MCP ``CallToolResult`` → dsh tool-result content (plain dictionaries; the SDK's types are read by attribute).

* text → text; an image → an image block (:func:`dsh.images.image_block`: checked by its bytes, a ``data:`` URI
  with its real type) when the model takes images, else a short note, and a note saying why for what is no
  acceptable image (not PNG/JPEG/GIF/WebP by its bytes, over 20 MB, not base64);
  audio → a note; an embedded text resource → its text (with its URI), a binary one → a note; a resource link
  → its URI; ``structuredContent`` → its JSON as text when there is no text at all.
* Nothing is ever dropped silently: an empty result says so.
"""

from __future__ import annotations

import json
from typing import Any

from dsh.images import ImageError, check_image, decode_base64, image_block
from dsh.services.llm import ContentBlock

__all__ = ["map_result"]


def _block(item: Any, images: bool) -> ContentBlock | None:
    kind = getattr(item, "type", None)
    if kind == "text":
        return {"type": "text", "text": str(item.text)}
    if kind == "image":
        mime = str(getattr(item, "mimeType", "") or "image/png")
        if not images:
            return {"type": "text", "text": f"[image ({mime}) omitted: the model does not take images]"}
        try:  # the one door for images (dsh.images): PNG/JPEG/GIF/WebP by their bytes, 20 MB
            raw, encoded = decode_base64(str(item.data), "the tool's image")
            info = check_image(raw, mime, "the tool's image")
        except ImageError as exc:
            return {"type": "text", "text": f"[image omitted: {exc}]"}
        return image_block(encoded, info, len(raw))
    if kind == "audio":
        return {"type": "text", "text": f"[audio ({getattr(item, 'mimeType', 'audio')}) omitted]"}
    if kind == "resource":
        resource = item.resource
        uri = str(getattr(resource, "uri", ""))
        text = getattr(resource, "text", None)
        if isinstance(text, str):
            return {"type": "text", "text": f"{uri}\n{text}" if uri else text}
        return {
            "type": "text",
            "text": f"[binary resource {uri} ({getattr(resource, 'mimeType', None) or 'unknown type'})]",
        }
    if kind == "resource_link":
        return {"type": "text", "text": f"[resource {getattr(item, 'name', '')}: {item.uri}]"}
    return None


def map_result(result: Any, *, images: bool) -> tuple[list[ContentBlock], bool]:
    """``(content, is_error)`` of an SDK ``CallToolResult``."""
    content = [block for item in (result.content or []) if (block := _block(item, images)) is not None]
    structured = getattr(result, "structuredContent", None)
    if structured is not None and not any(b["type"] == "text" for b in content):
        content.append({"type": "text", "text": json.dumps(structured, ensure_ascii=False)})
    if not content:
        content = [{"type": "text", "text": "(the tool returned no content)"}]
    return content, bool(getattr(result, "isError", False))
