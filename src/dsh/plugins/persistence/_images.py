"""Image bytes out of the session log and back: the log line holds a reference, the blob store the bytes.

In memory (and on the wire) an image is base64: a model block's ``url`` is ``data:<mime>;base64,<b64>``; an ACP
block as the client sent it (``source.shown`` of a ``user/message``) has ``data`` (an ``image`` block) or
``blob`` (a ``resource``) in base64. In the file each of those strings is replaced, in place, by a reference to
the decoded bytes in the :class:`~._blobs.BlobStore`:

* ``url``: ``dsh-blob:<mime>;sha256,<hex>`` (the MIME type rebuilds the ``data:`` URL);
* ``data`` / ``blob``: ``dsh-blob:sha256,<hex>``.

Loading puts the base64 back. Only canonical base64 is replaced (what dsh's own door, tools and MCP results make),
so the string loaded is exactly the string stored: replays are byte-identical. Anything else is left inline,
never lost. A reference cannot come from outside: the ACP door and MCP results accept only valid base64, and
``dsh-blob:`` is not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dsh.images import canonical_bytes

__all__ = ["MARK", "externalize", "internalize", "mentions_images"]

MARK = "dsh-blob:"
_DATA_URL = "data:"
_BASE64 = ";base64,"
_IMAGE_TYPE = b'"type":"image"'


def mentions_images(line: bytes) -> bool:
    """Whether an encoded event line may hold image base64: a quick test before the walk (one C-level search,
    ~0.6 µs per KB). Every event with a base64 image holds a ``"type":"image"`` block: a resource whose blob is
    an image is accepted only as an image block of the same ``user/message``."""
    return _IMAGE_TYPE in line


def _out_value(block: dict[str, Any], put: Callable[[bytes], str]) -> dict[str, Any] | None:
    """A copy of *block* with its base64 replaced by a reference, or None when there is none to replace."""
    if block.get("type") == "image":
        url = block.get("url")
        if isinstance(url, str) and url.startswith(_DATA_URL) and _BASE64 in url:
            mime, _, encoded = url[len(_DATA_URL) :].partition(_BASE64)
            raw = canonical_bytes(encoded)
            if raw is not None and ";" not in mime and "," not in mime:
                return {**block, "url": f"{MARK}{mime};sha256,{put(raw)}"}
        data = block.get("data")
        if isinstance(data, str):
            raw = canonical_bytes(data)
            if raw is not None:
                return {**block, "data": f"{MARK}sha256,{put(raw)}"}
    blob = block.get("blob")
    if isinstance(blob, str) and "uri" in block:
        raw = canonical_bytes(blob)
        if raw is not None:
            return {**block, "blob": f"{MARK}sha256,{put(raw)}"}
    return None


def externalize(value: Any, put: Callable[[bytes], str]) -> Any:
    """*value* with every image's base64 replaced by a reference (*put* stores the bytes and gives the digest);
    containers that hold none are returned as they are (shared, not copied)."""
    if isinstance(value, dict):
        replaced = _out_value(value, put)
        source = replaced if replaced is not None else value
        changed: dict[str, Any] | None = replaced
        for key, item in source.items():
            if isinstance(item, dict | list):
                new = externalize(item, put)
                if new is not item:
                    if changed is None:
                        changed = dict(source)
                    changed[key] = new
        return changed if changed is not None else value
    if isinstance(value, list):
        items = [externalize(item, put) if isinstance(item, dict | list) else item for item in value]
        return items if any(new is not old for new, old in zip(items, value, strict=True)) else value
    return value


def _in_value(block: dict[str, Any], get: Callable[[str], str | None]) -> None:
    for key in ("url", "data", "blob"):
        text = block.get(key)
        if not isinstance(text, str) or not text.startswith(MARK):
            continue
        head, _, digest = text[len(MARK) :].rpartition(",")
        encoded = get(digest)
        if encoded is None:  # the bytes are gone (the blob store was cleared): said in text, never an empty image
            note = f"[image no longer stored: sha256 {digest[:12]}]"
            if key == "blob":
                del block["blob"]
                block["text"] = note
            else:
                block.clear()
                block.update({"type": "text", "text": note})
            return
        if key == "url" and head.endswith(";sha256"):
            block[key] = f"{_DATA_URL}{head[: -len(';sha256')]}{_BASE64}{encoded}"
        elif head == "sha256":
            block[key] = encoded


def internalize(value: Any, get: Callable[[str], str | None]) -> None:
    """Put the base64 back in place of every reference in *value* (freshly parsed data, changed in place);
    *get* gives a digest's base64, None when the store lost it (the block then becomes a text note saying so)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if "url" in item or "data" in item or "blob" in item:
                _in_value(item, get)
            stack.extend(child for child in item.values() if isinstance(child, dict | list))
        elif isinstance(item, list):
            stack.extend(child for child in item if isinstance(child, dict | list))
