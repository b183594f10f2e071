"""Real image files made in memory (standard library only): what tests send as prompts, tool files and MCP results.

:func:`png` is a complete, decodable PNG (IHDR, IDAT, IEND with CRCs); :func:`jpeg` a baseline JPEG header with
its frame size (enough for any header reader, and what providers check first); :func:`gif` and :func:`webp`
likewise. *pad* makes a file of at least that many bytes (an ancillary PNG chunk, a JPEG comment), so size limits
can be tested with files that are images by their bytes.
"""

from __future__ import annotations

import base64
import struct
import zlib

__all__ = ["b64", "gif", "jpeg", "png", "webp"]


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png(width: int = 4, height: int = 3, *, pad: int = 0, seed: int = 0) -> bytes:
    """An RGB PNG of *width* x *height* (pixels vary with *seed*), at least *pad* bytes long."""
    rows = b"".join(b"\x00" + bytes((x * 40 + seed) % 256 for x in range(width)) * 3 for _ in range(height))
    head = b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    body = _chunk(b"IDAT", zlib.compress(rows[: width * height * 3 + height]))
    extra = b""
    missing = pad - len(head) - len(body) - 12
    if missing > 0:
        extra = _chunk(b"tEXt", b"c\x00" + b"x" * max(missing - 12 - 2, 0))
    return head + extra + body + _chunk(b"IEND", b"")


def jpeg(width: int = 8, height: int = 6, *, pad: int = 0) -> bytes:
    """A baseline JPEG header (SOI, APP0, a comment of *pad* bytes, SOF0 with the size) and EOI."""
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    comment = b""
    if pad > 0:
        text = b"p" * min(pad, 65_000)
        comment = b"\xff\xfe" + struct.pack(">H", len(text) + 2) + text
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, height, width, 3) + b"\x01\x11\x00\x02\x11\x01\x03\x11\x01"
    return b"\xff\xd8" + app0 + comment + sof + b"\xff\xd9"


def gif(width: int = 2, height: int = 2) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00\x00\x00;"


def webp(width: int = 5, height: int = 7) -> bytes:
    """A lossless (VP8L) WebP header of *width* x *height*."""
    bits = (width - 1) | ((height - 1) << 14)
    payload = b"\x2f" + bits.to_bytes(4, "little") + b"\x00" * 4
    chunk = b"VP8L" + struct.pack("<I", len(payload)) + payload
    return b"RIFF" + struct.pack("<I", 4 + len(chunk)) + b"WEBP" + chunk


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
