"""``@path`` in a message: the file goes along with the prompt.

Guarantees: the text block is sent as typed (the model sees where the user wrote ``@path``); each ``@path``
naming an existing regular file (relative to the working directory, or absolute) adds one block after it: the
file's text as an embedded ``resource`` when the agent accepts embedded context and the file is UTF-8 text of
at most :data:`MAX_EMBED` bytes, else a ``resource_link`` the agent can read itself. A mention of something that
is not a file adds nothing. The same file mentioned twice is attached once.
"""

from __future__ import annotations

import mimetypes
import os
import re
from pathlib import Path
from typing import Any

__all__ = ["MAX_EMBED", "MENTION", "prompt_blocks"]

MAX_EMBED = 256 * 1024
MENTION = re.compile(r"(?<!\S)@(\S+)")


def prompt_blocks(text: str, cwd: str, *, embed: bool) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}]
    seen: set[Path] = set()
    for match in MENTION.finditer(text):
        raw = match.group(1).rstrip(".,;:!?)")
        path = Path(os.path.expanduser(raw))
        path = (path if path.is_absolute() else Path(cwd) / path).resolve()
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        blocks.append(_block(path, raw, embed=embed))
    return blocks


def _block(path: Path, name: str, *, embed: bool) -> dict[str, Any]:
    uri = path.as_uri()
    mime = mimetypes.guess_type(path.name)[0] or "text/plain"
    if embed:
        try:
            size = path.stat().st_size
            if size <= MAX_EMBED:
                text = path.read_bytes().decode("utf-8")
                return {"type": "resource", "resource": {"uri": uri, "text": text, "mimeType": mime}}
        except (OSError, UnicodeDecodeError):
            pass
    link: dict[str, Any] = {"type": "resource_link", "uri": uri, "name": name}
    try:
        link["size"] = path.stat().st_size
    except OSError:
        pass
    return link
