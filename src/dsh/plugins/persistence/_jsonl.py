"""The JSONL ``session_persistence`` backend: one append-only file per session in a data directory.

Write path (through the loop's seams, never through the loop):

* ``session/created`` registers a writer for the session; nothing touches the disk until its first event.
* ``session/event`` queues the event's line; a writer task wakes and writes what is queued with one
  ``write`` (the loop yields every few chunks, so a killed process loses at most its last moments). The
  first write creates the file atomically (header and first events in a temporary file, then a rename).
* ``session/flush`` (awaited by the loop after every turn) writes what is queued and ``fsync``\\ s; so does
  ``session/disposed`` and the plugin's own disposal.

Guarantees:

* Ids come through :func:`~dsh.services.sessions.check_session_id`: no client input can name a file outside
  the data directory.
* One writer per session file across processes: the file is held under an exclusive ``flock`` while its
  session is live here; a second process asked to load it gets :class:`SessionLockedError` and the file is
  untouched.
* Loading repairs a crashed session (see :mod:`._format`) and makes the repair durable before returning;
  a file with a corrupt middle is reported (file and line) and left exactly as it was.
"""

from __future__ import annotations

import errno
import fcntl
import gc
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from dsh._log import get_logger
from dsh.errors import DshError
from dsh.plugins.persistence._format import CorruptSessionError, encode_event, encode_header, scan
from dsh.services.sessions import (
    LoadedSession,
    Session,
    SessionEvent,
    SessionHeader,
    SessionInfo,
    check_session_id,
    title_from_content,
)

if TYPE_CHECKING:
    pass

__all__ = ["JsonlPersistence", "SessionLockedError", "SessionNotFoundError", "default_data_dir"]

log = get_logger("dsh.persistence")
_SUFFIX = ".jsonl"


def default_data_dir() -> Path:
    """``$DSH_DATA_DIR``, else ``$XDG_DATA_HOME/dsh/sessions``, else ``~/.local/share/dsh/sessions``."""
    explicit = os.environ.get("DSH_DATA_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "dsh" / "sessions"


class SessionNotFoundError(DshError, KeyError):
    default_code = "SESSION_NOT_FOUND"

    def __str__(self) -> str:
        return self.message


class SessionLockedError(DshError):
    default_code = "SESSION_LOCKED"


@dataclass(eq=False)
class _Writer:
    id: str
    header: SessionHeader
    path: Path
    fd: int | None = None
    pending: list[bytes] = field(default_factory=list)
    next_seq: int = 0
    unsynced: bool = False
    """Bytes were written since the last fsync."""


def _lock(fd: int, path: Path) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise SessionLockedError(f"session file {path} is in use by another dsh process") from None
        raise


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class JsonlPersistence:
    """The ``session_persistence`` service (see :class:`~dsh.services.sessions.SessionPersistence`)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._writers: dict[str, _Writer] = {}
        self._loaded: dict[str, _Writer] = {}
        self._wakeup = anyio.Event()

    # -- paths ------------------------------------------------------------------------------------------

    def path_of(self, session_id: str) -> Path:
        return self.root / f"{check_session_id(session_id)}{_SUFFIX}"

    # -- write path (listeners) -------------------------------------------------------------------------

    def on_created(self, session: Session) -> None:
        loaded = self._loaded.pop(session.id, None)
        if loaded is not None:
            self._writers[session.id] = loaded
            return
        if session.id in self._writers:
            return
        try:
            path = self.path_of(session.id)
        except ValueError:
            log.warning("session id is not storable; the session will not be persisted", session_id=session.id[:80])
            return
        writer = _Writer(session.id, session.header, path, next_seq=session.seq)
        if session.seq:  # a seeded session we did not load ourselves (a fork): its seed is stored once
            writer.pending.extend(encode_event(e) for e in session.events)
        self._writers[session.id] = writer

    def on_event(self, session: Session, event: SessionEvent) -> None:
        writer = self._writers.get(session.id)
        if writer is None:
            return
        writer.pending.append(encode_event(event))
        writer.next_seq = event.seq + 1
        self._wakeup.set()

    async def on_flush(self, session: Session) -> None:
        writer = self._writers.get(session.id)
        if writer is None:
            return
        self._write(writer)
        if writer.fd is not None and writer.unsynced:
            writer.unsynced = False
            await anyio.to_thread.run_sync(os.fsync, writer.fd)

    def on_disposed(self, session: Session) -> None:
        writer = self._writers.pop(session.id, None)
        if writer is not None:
            self._close(writer)

    async def run_writer(self) -> None:
        """Write queued lines soon after they are appended (one ``write`` per session per wake-up)."""
        while True:
            await self._wakeup.wait()
            self._wakeup = anyio.Event()
            for writer in list(self._writers.values()):
                if writer.pending:
                    try:
                        self._write(writer)
                    except OSError:
                        log.exception("cannot write session file", session_id=writer.id)

    def close_all(self) -> None:
        for writer in [*self._writers.values(), *self._loaded.values()]:
            self._close(writer)
        self._writers.clear()
        self._loaded.clear()

    def _write(self, writer: _Writer) -> None:
        """Write the queued lines; on failure they stay queued and the file is as it was before."""
        if not writer.pending:
            return
        count = len(writer.pending)
        data = b"".join(writer.pending)
        if writer.fd is None:
            writer.fd = self._create(writer, data)
        else:
            size = os.lseek(writer.fd, 0, os.SEEK_END)
            try:
                _write_all(writer.fd, data)
            except OSError:
                os.ftruncate(writer.fd, size)  # no half line left behind to be taken for a torn tail
                raise
        del writer.pending[:count]
        writer.unsynced = True

    def _create(self, writer: _Writer, first: bytes) -> int:
        """Create the file with its header and first lines, atomically; return the locked append fd."""
        self.root.mkdir(parents=True, exist_ok=True)
        temporary = writer.path.with_name(f".{writer.path.name}.{os.getpid()}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
        try:
            _lock(fd, temporary)
            _write_all(fd, encode_header(writer.header) + first)
            os.fsync(fd)
            if writer.path.exists():
                raise FileExistsError(f"session file {writer.path} already exists")
            os.rename(temporary, writer.path)
        except BaseException:
            os.close(fd)
            try:
                os.unlink(temporary)
            except FileNotFoundError:
                pass
            raise
        return fd

    def _close(self, writer: _Writer) -> None:
        try:
            self._write(writer)
            if writer.fd is not None and writer.unsynced:  # usually synced already by the last turn's flush
                os.fsync(writer.fd)
        except OSError:
            log.exception("cannot write session file on close", session_id=writer.id)
        finally:
            if writer.fd is not None:
                os.close(writer.fd)  # releases the flock
                writer.fd = None

    # -- the SessionPersistence seam --------------------------------------------------------------------

    async def load(self, session_id: str) -> LoadedSession:
        """Read, repair (durably) and lock a stored session; its file stays locked while it is live here."""
        path = self.path_of(session_id)
        if session_id in self._writers or session_id in self._loaded:
            raise SessionLockedError(f"session {session_id} is already open in this dsh process")
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND)
        except FileNotFoundError:
            raise SessionNotFoundError(f"no stored session {session_id!r}") from None
        try:
            _lock(fd, path)
            content = await anyio.to_thread.run_sync(_read_all, fd)
            result = scan(content, str(path))
            if result.header.id != session_id:
                raise CorruptSessionError(f"{path}:1: the header names session {result.header.id!r}")
            if result.keep_bytes < len(content):
                os.ftruncate(fd, result.keep_bytes)
                log.warning("cut a torn final line", session_id=session_id, bytes=len(content) - result.keep_bytes)
            if result.closers:
                _write_all(fd, b"".join(encode_event(e) for e in result.closers))
                log.warning("closed an interrupted turn", session_id=session_id, events=len(result.closers))
            if result.keep_bytes < len(content) or result.closers:
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        self._loaded[session_id] = _Writer(session_id, result.header, path, fd, next_seq=len(result.events))
        del content
        # A loaded history lives as long as its session and holds no cycles: moved out of the collector's
        # generations, a million events are never rescanned by later collections (issue #12).
        gc.freeze()
        return LoadedSession(result.header, result.events, owned=True)

    def release(self, session_id: str) -> None:
        """Give up a loaded session that never became live (its resume failed)."""
        writer = self._loaded.pop(session_id, None)
        if writer is not None:
            self._close(writer)

    async def has(self, session_id: str) -> bool:
        return self.path_of(session_id).exists()

    def _infos(self) -> list[SessionInfo]:
        if not self.root.is_dir():
            return []
        infos = []
        for path in self.root.iterdir():
            if path.suffix != _SUFFIX or path.name.startswith("."):
                continue
            try:
                infos.append(_read_info(path))
            except Exception:  # one bad file must not hide the others
                log.warning("skipping an unreadable session file", path=str(path))
        infos.sort(key=lambda info: (-info.updated_at, info.id))
        return infos

    async def delete(self, session_id: str) -> None:
        """Remove a stored session (an unknown id is not an error). A session live here is closed first."""
        path = self.path_of(session_id)
        writer = self._writers.pop(session_id, None) or self._loaded.pop(session_id, None)
        if writer is not None:
            self._close(writer)
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            _lock(fd, path)
            path.unlink()
        finally:
            os.close(fd)

    async def list(self) -> list[SessionInfo]:  # last: the name shadows the builtin in the class body
        """Every stored session, newest first (header, modification time, title), without loading them."""
        return await anyio.to_thread.run_sync(self._infos)


def _read_all(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks: list[bytes] = []
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


_TITLE_SCAN_LINES = 64


def _read_info(path: Path) -> SessionInfo:
    """Header, mtime and title (the first user message's text) from the first lines of a file."""
    import json

    updated = path.stat().st_mtime
    with path.open("rb") as file:
        header: dict[str, Any] = json.loads(file.readline())
        if header.get("type") != "session":
            raise ValueError("not a session file")
        title = None
        for _ in range(_TITLE_SCAN_LINES):
            line = file.readline()
            if not line:
                break
            if b'"user/message"' not in line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                break
            title = title_from_content(event.get("data", {}).get("content", []))
            break
    return SessionInfo(
        id=str(header["id"]),
        cwd=header.get("cwd"),
        created_at=float(header.get("created_at", 0.0)),
        updated_at=updated,
        title=title,
    )
