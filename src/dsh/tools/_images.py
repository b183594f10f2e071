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

import anyio.to_thread

from dsh._text import plural
from dsh.images import MAX_IMAGE_BYTES as _MAX
from dsh.images import ImageError, check_image, describe_image, image_block
from dsh.services.llm import ContentBlock
from dsh.tools._errors import ToolError
from dsh.tools._safeopen import open_checked

__all__ = ["read_image"]


def _read(real: str) -> bytes:
    fd = open_checked(real, os.O_RDONLY)
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


async def read_image(real: str, shown: str, declared: str, size: int) -> list[ContentBlock]:
    """The content of ``read_file`` on the image at *real* (*shown*: its path as the model names it; *declared*
    and *size*: its type by name and its size on disk): a line describing it, then the image. Raises
    :class:`ToolError` (``NOT_AN_IMAGE``) for what the door refuses, saying why."""
    what = f"{shown} ({declared}, {plural(size, 'byte')})"
    if size > _MAX:
        raw = b""
        problem = f"it is over the {_MAX // (1024 * 1024)} MB limit per image"
    else:
        raw = await anyio.to_thread.run_sync(_read, real)
        try:
            info = check_image(raw, declared, shown)
            problem = ""
        except ImageError as exc:
            problem = str(exc)
    if problem or not raw:
        raise ToolError(
            f"{what} is not text, and not an image a model can be shown: {problem or 'the file is empty'}",
            "NOT_AN_IMAGE",
        )
    block = image_block(base64.b64encode(raw).decode("ascii"), info, len(raw), shown)
    return [{"type": "text", "text": f"{shown}: {describe_image({**block, 'name': ''})}"}, block]
