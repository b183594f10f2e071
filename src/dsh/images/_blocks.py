"""Image bytes → a checked image content block; a block's description and its token estimate.

One door for every image dsh hands a model (a prompt's ``image`` or ``resource`` block, ``read_file`` of an
image, an MCP tool's image result): the bytes are decoded, recognised by :func:`~dsh.images._sniff.sniff` (PNG,
JPEG, GIF, WebP only) and held to :data:`MAX_IMAGE_BYTES`, else :class:`ImageError` says what is wrong and what
to do. Nothing is downscaled: no image library is a dependency (RFC 0022).

The block (:class:`~dsh.services.llm.ImageBlock`) carries the image as a ``data:`` URL with its real MIME type
(the bytes', not the declared one: providers refuse a mismatch) and what the rest of dsh needs without
decoding it again: ``mime_type``, ``width``, ``height``, ``size`` (bytes) and, when known, a ``name``.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from typing import TYPE_CHECKING, Any

from dsh.images._sniff import FORMATS, ImageInfo, sniff

if TYPE_CHECKING:
    from dsh.services.llm import ImageBlock

__all__ = [
    "DEFAULT_MAX_PER_PROMPT",
    "MAX_IMAGE_BYTES",
    "TYPICAL_IMAGE_TOKENS",
    "ImageError",
    "canonical_bytes",
    "check_image",
    "decode_base64",
    "describe_image",
    "image_block",
    "image_tokens",
]

MAX_IMAGE_BYTES = 20 * 1024 * 1024
"""The largest image accepted, in decoded bytes (OpenAI's per-image limit)."""
DEFAULT_MAX_PER_PROMPT = 20
"""Images per prompt unless the config file's ``images.max_per_prompt`` says otherwise."""
_WHITESPACE = re.compile(r"\s+")


class ImageError(ValueError):
    """An image dsh will not hand a model; the message says why and what to send instead."""


def canonical_bytes(text: str) -> bytes | None:
    """The bytes of *text* when it is canonical base64 (the standard alphabet, padded, no whitespace, zero
    trailing bits: exactly what ``b64encode`` of its bytes gives), else None. C-level checks only: no second
    encoding of the whole image (a 20 MB image is 27 MB of base64)."""
    try:
        raw = binascii.a2b_base64(text, strict_mode=True)
    except (binascii.Error, ValueError):
        return None
    size = len(raw)
    if len(text) != 4 * -(-size // 3):
        return None
    tail = size - (size % 3 or 3) if size else 0
    if text[-4:] != binascii.b2a_base64(raw[tail:], newline=False).decode("ascii")[-4:]:
        return None  # non-zero trailing bits: decodes, but is not what the bytes encode to
    return raw


def decode_base64(data: str, what: str = "the image") -> tuple[bytes, str]:
    """The bytes of base64 *data* and its canonical spelling (what is stored and replayed: *data* itself when
    it is canonical, as every well-behaved client sends it). Whitespace (MIME line breaks) is tolerated, nothing
    else."""
    raw = canonical_bytes(data)
    if raw is not None:
        return raw, data
    try:
        raw = base64.b64decode(_WHITESPACE.sub("", data), validate=True)
    except (binascii.Error, ValueError):
        raise ImageError(f"{what} is not valid base64") from None
    return raw, base64.b64encode(raw).decode("ascii")


def check_image(raw: bytes, declared: str | None = None, what: str = "the image") -> ImageInfo:
    """*raw*'s format and size when dsh can hand it to a model; else :class:`ImageError` naming the problem."""
    if len(raw) > MAX_IMAGE_BYTES:
        raise ImageError(
            f"{what} is {_size(len(raw))}, over the {_size(MAX_IMAGE_BYTES)} limit per image; "
            "send a smaller or downscaled image"
        )
    info = sniff(raw)
    if info is None:
        label = f" (declared {declared})" if declared else ""
        raise ImageError(
            f"{what}{label} is not a PNG, JPEG, GIF or WebP image by its content; "
            f"only {', '.join(name.upper() for name in FORMATS)} images are accepted"
        )
    return info


def image_block(encoded: str, info: ImageInfo, size: int, name: str | None = None) -> ImageBlock:
    """The content block of a checked image: *encoded* is its canonical base64, *size* its length in bytes."""
    block: dict[str, Any] = {
        "type": "image",
        "url": f"data:{info.mime_type};base64,{encoded}",
        "mime_type": info.mime_type,
        "width": info.width,
        "height": info.height,
        "size": size,
    }
    if name:
        block["name"] = name
    return block  # type: ignore[return-value]


def _size(count: int) -> str:
    if count >= 1024 * 1024:
        return f"{count / (1024 * 1024):.1f} MB"
    if count >= 1024:
        return f"{count / 1024:.0f} KB"
    return f"{count} bytes"


def describe_image(block: Any) -> str:
    """A short description of an image block for text (``PNG image, 800x600, 45 KB (shot.png)``), from what the
    block says of itself: never its bytes."""
    if not isinstance(block, dict):
        return "image"
    mime = block.get("mime_type")
    if not isinstance(mime, str):
        url = block.get("url")
        mime = url[5:].split(";", 1)[0] if isinstance(url, str) and url.startswith("data:") else None
    kind = mime.split("/", 1)[1].upper() if isinstance(mime, str) and "/" in mime else ""
    parts = [f"{kind} image" if kind else "image"]
    width, height, size = block.get("width"), block.get("height"), block.get("size")
    if type(width) is int and type(height) is int:
        parts.append(f"{width}x{height}")
    if type(size) is int:
        parts.append(_size(size))
    text = ", ".join(parts)
    name = block.get("name")
    return f"{text} ({name})" if isinstance(name, str) and name else text


TYPICAL_IMAGE_TOKENS = 1600
"""The estimate for an image whose size is not known (the most a large image costs with Anthropic)."""


def image_tokens(width: int | None, height: int | None) -> int:
    """Prompt tokens an image of *width* x *height* pixels costs, by the providers' published rules of thumb; the
    larger of two, so that compaction decides early rather than late:

    * Anthropic: the image is scaled to at most 1568 pixels on its long side and about 1.15 megapixels, then
      costs ``width * height / 750`` tokens;
    * OpenAI (high detail): scaled to fit 2048x2048, then to 768 pixels on its short side; 85 tokens plus 170 per
      512-pixel tile.
    """
    if not width or not height or width < 1 or height < 1:
        return TYPICAL_IMAGE_TOKENS
    scale = min(1.0, 1568 / max(width, height), math.sqrt(1_150_000 / (width * height)))
    anthropic = math.ceil(width * scale * height * scale / 750)
    scale = min(1.0, 2048 / max(width, height))
    w, h = width * scale, height * scale
    scale = min(1.0, 768 / min(w, h))
    w, h = w * scale, h * scale
    openai = 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)
    return max(anthropic, openai)
