"""A file's state as dsh sees it (through the ``workspace`` seam, so an editor's buffer counts) and putting it back.

Guarantees:

* :func:`capture` never changes anything: the text through ``workspace/read`` (the editor's buffer when the
  client serves files), else the bytes on this disk; the mode from this disk when the file is on it. A path
  neither has is "did not exist".
* :func:`restore` writes text through ``workspace/write`` (so ``fs/write_text_file`` when the client has it, and
  open buffers follow), bytes that are not UTF-8 straight to this disk, then the mode; a state "did not exist"
  removes the file from this disk (an editor has no delete). Symbolic links and directories are never removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from dsh.checkpoints._log import FileState

if TYPE_CHECKING:
    from dsh.services.tools import ToolExecution

__all__ = ["Blobs", "MemoryBlobs", "capture", "capture_local", "restore", "state_of"]


class Blobs(Protocol):
    """The part of :class:`dsh.plugins.persistence.BlobStore` checkpoints use."""

    def put(self, owner: str, data: bytes) -> str: ...

    def get(self, digest: str) -> bytes: ...


class MemoryBlobs:
    """Blobs for sessions that are not durable (no data directory): they live as long as the process."""

    def __init__(self) -> None:
        self._objects: dict[str, bytes] = {}

    def put(self, owner: str, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        self._objects.setdefault(digest, data)
        return digest

    def get(self, digest: str) -> bytes:
        try:
            return self._objects[digest]
        except KeyError:
            raise FileNotFoundError(digest) from None


def _local(path: str) -> tuple[bytes, int] | None:
    """The regular file's bytes and mode on this disk, None when there is none (a link is followed, as the
    tools write through it)."""
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            return None
        with open(path, "rb") as file:
            return file.read(), stat.S_IMODE(info.st_mode)
    except OSError:
        return None


def state_of(data: bytes | None, mode: int | None) -> FileState:
    if data is None:
        return FileState(False)
    return FileState(True, hashlib.sha256(data).hexdigest(), mode)


async def capture_local(path: str) -> tuple[FileState, bytes | None]:
    """The state of *path* on this disk alone (no request to an editor: a tool call's checkpoint costs no
    round trip; what an editor holds comes from the text the tool's prepare read)."""
    local = await anyio.to_thread.run_sync(_local, path)
    if local is None:
        return FileState(False), None
    return state_of(local[0], local[1]), local[0]


async def capture(workspace: Any, execution: ToolExecution, path: str) -> tuple[FileState, bytes | None]:
    """The state of the absolute *path* and its bytes (None when it does not exist); see the module docstring."""
    local = await anyio.to_thread.run_sync(_local, path)
    data: bytes | None = None
    if workspace is not None:
        try:
            data = (await workspace.read(execution, path)).encode("utf-8")
        except Exception:  # not text, not there, or the editor failed: this disk decides
            data = None
    mode = local[1] if local is not None else None
    if data is None and local is not None:
        data = local[0]
    if data is None:
        return FileState(False), None
    return FileState(True, hashlib.sha256(data).hexdigest(), mode), data


def _write_local(path: str, data: bytes, mode: int | None) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if mode is None else mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def _chmod(path: str, mode: int | None) -> None:
    if mode is not None and os.path.isfile(path):
        with contextlib.suppress(OSError):
            os.chmod(path, mode)


def _remove(path: str) -> None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISREG(info.st_mode):
        os.unlink(path)


async def restore(workspace: Any, execution: ToolExecution, path: str, state: FileState, data: bytes | None) -> None:
    """Put *state* (with its bytes *data*) back at *path*; see the module docstring. Raises ``OSError`` when
    the file cannot be written."""
    if not state.existed or data is None:
        await anyio.to_thread.run_sync(_remove, path)
        return
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and workspace is not None:
        await workspace.write(execution, path, text)
        await anyio.to_thread.run_sync(_chmod, path, state.mode)
        return
    await anyio.to_thread.run_sync(_write_local, path, data, state.mode)
    await anyio.to_thread.run_sync(_chmod, path, state.mode)
