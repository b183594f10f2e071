"""``fs/read_text_file`` and ``fs/write_text_file`` served by the chat: the agent reads and writes the files as
the user has them, through the user's own process.

Guarantees: paths must be absolute (ACP); a missing file answers -32002 (resource not found) and any other
failure -32603 with the reason, so the agent's tool reports why; a read honours ``line`` (1-based) and
``limit``; a write creates the file and its missing parent directories and replaces the file in one rename,
so a reader never sees half of it.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

import anyio

from dsh.chat._rpc import RpcError

__all__ = ["read_text_file", "write_text_file"]


def _path(params: Any) -> Path:
    path = params.get("path") if isinstance(params, dict) else None
    if not isinstance(path, str) or not os.path.isabs(path):
        raise RpcError(-32602, "Invalid params", {"path": "must be an absolute path"})
    return Path(path)


def _positive(params: dict[str, Any], key: str) -> int | None:
    value = params.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < (1 if key == "line" else 0):
        raise RpcError(-32602, "Invalid params", {key: "must be a positive integer"})
    return value


def _read_regular(path: Path) -> str:
    """The file's text; never blocks on a FIFO or a device (``O_NONBLOCK``, then ``fstat``): anything but a
    regular file is refused."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with open(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, a device or a socket)")
        return handle.read().decode("utf-8", "replace")


async def read_text_file(params: Any) -> dict[str, Any]:
    path = _path(params)
    line, limit = _positive(params, "line"), _positive(params, "limit")
    try:
        text = await anyio.to_thread.run_sync(_read_regular, path)
    except FileNotFoundError:
        raise RpcError(-32002, f"Resource not found: {path}", {"path": str(path)}) from None
    except OSError as error:
        raise RpcError(-32603, f"cannot read {path}: {error.strerror or error}") from None
    if line is not None or limit is not None:
        lines = text.splitlines(keepends=True)
        start = (line or 1) - 1
        text = "".join(lines[start : start + limit] if limit is not None else lines[start:])
    return {"content": text}


async def write_text_file(params: Any) -> dict[str, Any]:
    path = _path(params)
    content = params.get("content")
    if not isinstance(content, str):
        raise RpcError(-32602, "Invalid params", {"content": "must be a string"})
    try:
        await anyio.to_thread.run_sync(_replace, path, content)
    except OSError as error:
        raise RpcError(-32603, f"cannot write {path}: {error.strerror or error}") from None
    return {}


def _replace(path: Path, content: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o7777 if path.exists() else None
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(content)
        if mode is not None:
            os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
