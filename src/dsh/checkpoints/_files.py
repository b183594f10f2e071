"""A file's state as dsh sees it, taking checkpoints in chunks, and putting files back atomically.

Guarantees:

* :func:`capture` never changes anything: the text through ``workspace/read`` (the editor's buffer when the
  client serves files), else the bytes on this disk; the mode from this disk when the file is on it. A path
  neither has is "did not exist".
* :func:`checkpoint_local` and :func:`state_local` read the file in chunks of :data:`CHUNK` bytes: memory stays
  bounded by one chunk whatever the file's size, and the blob store keeps runs of zeros as holes.
* :func:`target_of` resolves a path to restore as the tools resolve it (the session's roots, symlinks resolved)
  and refuses, naming why, a path that is now a symbolic link or whose real location is outside the roots.
  Nothing is ever written through a link: the directory is opened without following any symlink
  (:func:`dsh.tools.open_checked`) and every later step works on that descriptor.
* :func:`restore_files` is all or nothing for the files it writes on this disk: each one is first copied in
  full, in chunks, to a temporary file beside it (``.NAME.dsh-restore-XXXX``, mode set on the descriptor,
  ``fsync``), and only when every copy succeeded are they renamed over their targets (then the directory is
  synced). A failure (a full disk, an I/O error) removes the copies, changes no target, and is named with the
  file and why (for a full disk: how much was needed and how much is free). A crash mid-way leaves each target
  exactly as it was or exactly restored, never a prefix; a copy a crash left behind is removed by the next
  restore of that file. Text goes through ``workspace/write`` when a listener serves it (the editor's
  ``fs/write_text_file``, so open buffers follow; the mode is then set on a descriptor opened without following
  links); only the local default writes the temporary copy. A state "did not exist" removes the regular file
  from this disk (an editor has no delete); symbolic links and directories are never removed.
"""

from __future__ import annotations

import codecs
import errno
import hashlib
import io
import os
import secrets
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

import anyio

from dsh import events as ev
from dsh.checkpoints._log import FileState

if TYPE_CHECKING:
    from dsh.kernel import Context
    from dsh.services.tools import ToolExecution
    from dsh.tools import WriteRequest

__all__ = [
    "CHUNK",
    "Blobs",
    "MemoryBlobs",
    "RestoreOutcome",
    "Target",
    "capture",
    "checkpoint_local",
    "describe_error",
    "restore_files",
    "size_local",
    "state_local",
    "state_of",
    "target_of",
]

CHUNK = 1 << 20
"""Bytes read, hashed and written at a time (checkpoints and restores)."""
TEMP_MARK = ".dsh-restore-"


class Blobs(Protocol):
    """The part of :class:`dsh.plugins.persistence.BlobStore` checkpoints use."""

    def put(self, owner: str, data: bytes) -> str: ...

    def put_file(self, owner: str, source: BinaryIO) -> tuple[str, int]: ...

    def open(self, digest: str) -> BinaryIO: ...

    def get(self, digest: str) -> bytes: ...


class MemoryBlobs:
    """Blobs for sessions that are not durable (no data directory): they live as long as the process."""

    def __init__(self) -> None:
        self._objects: dict[str, bytes] = {}

    def put(self, owner: str, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        self._objects.setdefault(digest, data)
        return digest

    def put_file(self, owner: str, source: BinaryIO) -> tuple[str, int]:
        data = source.read()
        return self.put(owner, data), len(data)

    def open(self, digest: str) -> BinaryIO:
        return io.BytesIO(self.get(digest))

    def get(self, digest: str) -> bytes:
        try:
            return self._objects[digest]
        except KeyError:
            raise FileNotFoundError(digest) from None


def state_of(data: bytes | None, mode: int | None) -> FileState:
    if data is None:
        return FileState(False)
    return FileState(True, hashlib.sha256(data).hexdigest(), mode)


def _open_regular(path: str) -> tuple[BinaryIO, os.stat_result] | None:
    """*path* opened for reading when it is a regular file (a link is followed, as the tools write through it)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            return None
        os.set_blocking(fd, True)
        return open(fd, "rb", buffering=0), info
    except OSError:
        os.close(fd)
        return None


def state_local(path: str) -> FileState:
    """The state of *path* on this disk alone, hashed in chunks (no request to an editor). Blocking."""
    opened = _open_regular(path)
    if opened is None:
        return FileState(False)
    file, info = opened
    hasher = hashlib.sha256()
    with file:
        while chunk := file.read(CHUNK):
            hasher.update(chunk)
    return FileState(True, hasher.hexdigest(), stat.S_IMODE(info.st_mode))


def size_local(path: str) -> int | None:
    """The size of the regular file at *path* (a link followed), None when there is none."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None


def checkpoint_local(path: str, blobs: Blobs, owner: str) -> FileState:
    """Store the bytes of *path* on this disk in *blobs* for *owner*, streamed in chunks; its state. Blocking."""
    opened = _open_regular(path)
    if opened is None:
        return FileState(False)
    file, info = opened
    with file:
        digest, _size = blobs.put_file(owner, file)
    return FileState(True, digest, stat.S_IMODE(info.st_mode))


async def capture(workspace: Any, execution: ToolExecution, path: str) -> tuple[FileState, bytes | None]:
    """The state of the absolute *path*, and its bytes when an editor gave them (None when they are this disk's:
    :func:`checkpoint_local` stores those in chunks); see the module docstring."""
    data: bytes | None = None
    if workspace is not None:
        try:
            data = (await workspace.read(execution, path)).encode("utf-8")
        except Exception:  # not text, not there, or the editor failed: this disk decides
            data = None
    local = await anyio.to_thread.run_sync(state_local, path)
    if data is None:
        return local, None
    return FileState(True, hashlib.sha256(data).hexdigest(), local.mode), data


# -- where a restore may write ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Target:
    """A file to put back: *path* as the session knows it, *real* where it is written (no symlink in it)."""

    path: str
    real: str
    state: FileState


def target_of(workspace: Any, execution: ToolExecution, path: str, state: FileState) -> Target | str:
    """The :class:`Target` for *path*, or why it may not be written (a symbolic link now, outside the roots)."""
    try:
        if stat.S_ISLNK(os.lstat(path).st_mode):
            return f"it is now a symbolic link (to {os.readlink(path)}); dsh does not write through links"
    except OSError:
        pass
    if workspace is not None:
        resolved = workspace.resolve(execution, path)
        if not resolved.inside:
            return f"its real location {resolved.real} is outside the session's directories"
        real = resolved.real
    else:
        real = os.path.realpath(path)
    return Target(path, real, state)


# -- writing -----------------------------------------------------------------------------------------------


def _write_chunk(fd: int, chunk: bytes) -> None:
    """Write all of *chunk* (the seam a fault test replaces to fill the disk or stop mid-restore)."""
    view = memoryview(chunk)
    while view:
        view = view[os.write(fd, view) :]


@dataclass(slots=True)
class _Staged:
    """A complete copy beside its target, not yet renamed over it."""

    directory: int
    temporary: str
    name: str
    target: Target

    def commit(self) -> None:
        try:
            os.rename(self.temporary, self.name, src_dir_fd=self.directory, dst_dir_fd=self.directory)
            try:
                os.fsync(self.directory)
            except OSError:
                pass  # some file systems refuse fsync on a directory; the rename itself is atomic
        finally:
            os.close(self.directory)

    def discard(self) -> None:
        try:
            os.unlink(self.temporary, dir_fd=self.directory)
        except OSError:
            pass
        finally:
            os.close(self.directory)


def _open_directory(real: str) -> tuple[int, str]:
    from dsh.tools import open_checked

    parent, name = os.path.split(real)
    return open_checked(parent, os.O_RDONLY | os.O_DIRECTORY, create_parents=True), name


def _sweep_leftovers(directory: int, name: str) -> None:
    """Remove the copies a crashed restore of *name* left beside it."""
    prefix = f".{name}{TEMP_MARK}"
    try:
        names = [entry for entry in os.listdir(directory) if entry.startswith(prefix)]
    except OSError:
        return
    for entry in names:
        try:
            if stat.S_ISREG(os.stat(entry, dir_fd=directory, follow_symlinks=False).st_mode):
                os.unlink(entry, dir_fd=directory)
        except OSError:
            continue


def _stage(target: Target, source: BinaryIO) -> _Staged:
    """Copy *source* in full beside *target* (see the module docstring). Blocking."""
    directory, name = _open_directory(target.real)
    try:
        _sweep_leftovers(directory, name)
        mode = target.state.mode
        if mode is None:
            try:
                current = os.stat(name, dir_fd=directory, follow_symlinks=False)
                mode = stat.S_IMODE(current.st_mode) if stat.S_ISREG(current.st_mode) else 0o644
            except OSError:
                mode = 0o644
        temporary = f".{name}{TEMP_MARK}{secrets.token_hex(4)}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(temporary, flags, 0o600, dir_fd=directory)
        try:
            while chunk := source.read(CHUNK):
                _write_chunk(fd, chunk)
            os.fchmod(fd, mode)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            try:
                os.unlink(temporary, dir_fd=directory)
            except OSError:
                pass
            raise
        os.close(fd)
    except BaseException:
        os.close(directory)
        raise
    return _Staged(directory, temporary, name, target)


def _remove(target: Target) -> None:
    """Remove the regular file at *target* (never a link or a directory; absent is fine). Blocking."""
    try:
        directory, name = _open_directory(target.real)
    except FileNotFoundError:
        return
    try:
        try:
            info = os.stat(name, dir_fd=directory, follow_symlinks=False)
        except FileNotFoundError:
            return
        if stat.S_ISREG(info.st_mode):
            os.unlink(name, dir_fd=directory)
            try:
                os.fsync(directory)
            except OSError:
                pass
    finally:
        os.close(directory)


def _set_mode(target: Target) -> None:
    """Set the target's mode on a descriptor opened without following links (after an editor wrote it)."""
    mode = target.state.mode
    if mode is None:
        return
    from dsh.tools import open_checked

    try:
        fd = open_checked(target.real, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return  # not on this disk (an editor's buffer only): nothing to chmod
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            os.fchmod(fd, mode)
    except OSError:
        pass
    finally:
        os.close(fd)


def _is_text(blobs: Blobs, digest: str) -> bool:
    """Whether the stored bytes are UTF-8 (checked in chunks)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    with blobs.open(digest) as source:
        try:
            while chunk := source.read(CHUNK):
                decoder.decode(chunk)
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            return False
    return True


def _human(size: int) -> str:
    value = float(size)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} bytes"


def describe_error(exc: BaseException, *, where: str | None = None, needed: int | None = None) -> str:
    """What went wrong, for people: the errno's name for storage errors (ENOSPC, EIO, EDQUOT, EROFS), and for a
    full disk how much was needed and how much is free at *where*."""
    from dsh.tools import PathChangedError

    if isinstance(exc, PathChangedError):
        return "a symbolic link appeared in its path while restoring; nothing was written through it"
    if isinstance(exc, OSError) and exc.errno is not None:
        name = errno.errorcode.get(exc.errno, str(exc.errno))
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            what = "disk full" if exc.errno == errno.ENOSPC else "disk quota exceeded"
            text = f"{what} ({name})"
            if needed is not None:
                text += f": restoring it needs {_human(needed)}"
                if where is not None:
                    try:
                        info = os.statvfs(where)
                        text += f", {_human(info.f_bavail * info.f_frsize)} free there"
                    except OSError:
                        pass
            return text
        if exc.errno == errno.EIO:
            return f"input/output error ({name}): the disk failed to read or write"
        return f"{exc.strerror or exc} ({name})"
    return f"{type(exc).__name__}: {exc}"


@dataclass(slots=True)
class RestoreOutcome:
    """``restored``: the files put back (all of them when ``failure`` is None); ``failure``: ``(path, why)`` of
    the file that could not be, in which case nothing staged on this disk was renamed over its target."""

    restored: list[Target] = field(default_factory=list)
    failure: tuple[str, str] | None = None


def _length(source: BinaryIO) -> int | None:
    try:
        return os.fstat(source.fileno()).st_size
    except (OSError, AttributeError, io.UnsupportedOperation):
        if isinstance(source, io.BytesIO):
            return len(source.getbuffer())
        return None


async def restore_files(
    ctx: Context, execution: ToolExecution, blobs: Blobs, targets: Sequence[Target]
) -> RestoreOutcome:
    """Put every target back (see the module docstring): copies first, renames after, removals last."""
    from dsh.tools import WriteRequest

    outcome = RestoreOutcome()
    writes = [t for t in targets if t.state.existed and t.state.digest]
    removals = [t for t in targets if not (t.state.existed and t.state.digest)]
    kinds: list[tuple[Target, bool]] = []
    for target in writes:
        assert target.state.digest is not None
        kinds.append((target, await anyio.to_thread.run_sync(_is_text, blobs, target.state.digest)))
    kinds.sort(key=lambda pair: pair[1])  # bytes first: an editor's write cannot be taken back
    staged: list[_Staged] = []
    current: Target | None = None
    needed: int | None = None
    try:
        for target, text in kinds:
            current, needed = target, None
            digest = target.state.digest
            assert digest is not None
            if not text:
                with blobs.open(digest) as source:
                    needed = _length(source)
                    staged.append(await anyio.to_thread.run_sync(_stage, target, source))
                continue
            data = await anyio.to_thread.run_sync(blobs.get, digest)
            needed = len(data)
            copies: list[_Staged] = []

            async def local(
                request: WriteRequest, target: Target = target, data: bytes = data, copies: list[_Staged] = copies
            ) -> None:
                copies.append(await anyio.to_thread.run_sync(_stage, target, io.BytesIO(data)))

            request = WriteRequest(execution, target.path, data.decode("utf-8"), target.real)
            await ctx.waterfall(ev.WORKSPACE_WRITE, request, default=local)
            if copies:
                staged.extend(copies)
            else:  # an editor wrote it
                await anyio.to_thread.run_sync(_set_mode, target)
                outcome.restored.append(target)
        for copy in list(staged):
            current, needed = copy.target, None
            await anyio.to_thread.run_sync(copy.commit)
            staged.remove(copy)
            outcome.restored.append(copy.target)
        for target in removals:
            current, needed = target, None
            await anyio.to_thread.run_sync(_remove, target)
            outcome.restored.append(target)
    except Exception as exc:
        for copy in staged:
            await anyio.to_thread.run_sync(copy.discard)
        path = current.path if current is not None else "?"
        where = os.path.dirname(current.real) if current is not None else None
        outcome.failure = (path, describe_error(exc, where=where, needed=needed))
    return outcome
