"""``read_file`` of an image: the file's bytes as the image block a vision model sees (RFC 0022).

The file is opened the way every tool opens what it checked (:func:`~dsh.tools._safeopen.open_checked`: its real
path, no symlink followed) and read up to one byte over :data:`~dsh.images.MAX_IMAGE_BYTES`. It goes through the
one door for images (:func:`dsh.images.check_image`: PNG, JPEG, GIF or WebP by its bytes, at most 20 MB); what
does not pass is a :class:`~dsh.tools._errors.ToolError` saying why. A model that does not take images gets the
block as a note with its description (the ``llm`` service does that), so the tool does not need to know
the model.
"""

from __future__ import annotations

import base64
import os

from dsh._text import plural
from dsh.images import MAX_IMAGE_BYTES as _MAX
from dsh.images import ImageError, check_image, describe_image, image_block
from dsh.services.llm import ContentBlock
from dsh.tools._errors import ToolError
from dsh.tools._offload import run_cpu, run_io
from dsh.tools._regular import open_regular

__all__ = ["read_image"]


def _read(real: str) -> bytes:
    fd = open_regular(real, os.O_RDONLY)
    try:
        chunks: list[bytes] = []
        left = _MAX + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _encode(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


async def read_image(real: str, shown: str, declared: str, size: int) -> list[ContentBlock]:
    """The content of ``read_file`` on the image at *real* (*shown*: its path as the model names it; *declared*
    and *size*: its type by name and its size on disk): a line describing it, then the image. Raises
    :class:`ToolError` (``NOT_AN_IMAGE``) for what the door refuses, saying why."""
    what = f"{shown} ({declared}, {plural(size, 'byte')})"
    if size > _MAX:
        raw = b""
        problem = f"it is over the {_MAX // (1024 * 1024)} MB limit per image"
    else:
        raw = await run_io(_read, real)
        try:
            info = await run_cpu(check_image, raw, declared, shown, timeout=30, what=f"checking the image {shown}")
            problem = ""
        except ImageError as exc:
            problem = str(exc)
    if problem or not raw:
        raise ToolError(
            f"{what} is not text, and not an image a model can be shown: {problem or 'the file is empty'}",
            "NOT_AN_IMAGE",
        )
    encoded = await run_cpu(_encode, raw, timeout=30, what=f"encoding the image {shown}")
    block = image_block(encoded, info, len(raw), shown)
    return [{"type": "text", "text": f"{shown}: {describe_image({**block, 'name': ''})}"}, block]
