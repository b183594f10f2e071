"""What an image's bytes say it is: PNG, JPEG, GIF or WebP, and its pixel size, read from its header.

Pure and standard-library only (``struct``), so the ACP door, the tools and MCP results can check an image
before anything is stored or sent. The declared MIME type is never trusted: a text file labelled ``image/png``,
an SVG (XML text, which providers refuse) or a truncated header is not an image here.

Guarantees: :func:`sniff` reads at most the bytes it is given and never raises on any input; it returns None
for anything that is not one of the four formats with a readable width and height (both at least 1).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = ["FORMATS", "ImageInfo", "sniff"]

FORMATS: dict[str, str] = {"png": "image/png", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp"}
"""The formats every vision provider takes (OpenAI, Anthropic, Gemini), by name, with their MIME type."""

_JPEG_SOF = frozenset({0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF})
"""Start-of-frame markers (every SOFn but DHT C4, JPG C8 and DAC CC): the segment that holds the size."""


@dataclass(frozen=True, slots=True)
class ImageInfo:
    format: str
    """``png``, ``jpeg``, ``gif`` or ``webp``."""
    width: int
    height: int

    @property
    def mime_type(self) -> str:
        return FORMATS[self.format]


def _png(data: bytes) -> tuple[int, int] | None:
    if len(data) < 24 or data[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def _gif(data: bytes) -> tuple[int, int] | None:
    if len(data) < 10:
        return None
    width, height = struct.unpack("<HH", data[6:10])
    return width, height


def _webp(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8 " and len(data) >= 30 and data[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L" and len(data) >= 25 and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X" and len(data) >= 30:
        return int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1
    return None


def _jpeg(data: bytes) -> tuple[int, int] | None:
    index, size = 2, len(data)
    while index + 4 <= size:
        if data[index] != 0xFF:
            return None
        marker = data[index + 1]
        if marker == 0xFF:  # fill byte
            index += 1
            continue
        if marker in (0x01, 0xD0, 0xD1, 0xD2, 0xD3, 0xD4, 0xD5, 0xD6, 0xD7):  # no length
            index += 2
            continue
        if marker in (0xD9, 0xDA):  # end of image or start of scan before any frame header
            return None
        length = int.from_bytes(data[index + 2 : index + 4], "big")
        if length < 2:
            return None
        if marker in _JPEG_SOF:
            if index + 9 > size:
                return None
            height, width = struct.unpack(">HH", data[index + 5 : index + 9])
            return width, height
        index += 2 + length
    return None


def sniff(data: bytes) -> ImageInfo | None:
    """The format and size of *data* when it is a PNG, JPEG, GIF or WebP image; else None."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        kind, size = "png", _png(data)
    elif data.startswith(b"\xff\xd8\xff"):
        kind, size = "jpeg", _jpeg(data)
    elif data.startswith((b"GIF87a", b"GIF89a")):
        kind, size = "gif", _gif(data)
    elif data.startswith(b"RIFF") and data[8:12] == b"WEBP":
        kind, size = "webp", _webp(data)
    else:
        return None
    if size is None or size[0] < 1 or size[1] < 1:
        return None
    return ImageInfo(kind, size[0], size[1])
