"""The JSONL ``session_persistence`` backend: one append-only file per session in a data directory.

Write path (through the loop's seams, never through the loop):

* ``session/created`` creates the file at once, atomically and durably (header, and a fork's seed, in a
  temporary file, ``fsync``, rename): a session exists on disk from its creation.
* ``session/event`` queues the event's line; a writer task wakes and writes what is queued with one
  ``write`` (the loop yields every few chunks, so a killed process loses at most its last moments).
* ``session/flush`` (awaited by the loop before and after every turn's ``turn/end``) writes what is queued
  and ``fsync``\\ s; so does ``session/disposed`` and the plugin's own disposal.

Guarantees:

* Ids come through :func:`~dsh.services.sessions.check_session_id`: no client input can name a file outside
  the data directory.
* One writer per session file across processes: the file is held under an exclusive ``flock`` while its
  session is live here; a second process asked to load it gets :class:`SessionLockedError` and the file is
  untouched.
* A write that fails is never reported as success: ``session/flush`` raises :class:`SessionWriteError`, the
  file is cut back to what was last durable (it loads), and every line since stays queued for the next flush.
  A synced flush is the unit; no line is ever written after a missing one (no hole in the ``seq`` sequence).
* A data directory that cannot hold sessions makes ``session/created``, ``load``, ``list``, ``has`` and
  ``delete`` raise :class:`StorageUnavailableError` (naming the directory and the setting to change), checked
  again on each call until it is fixed.
* Once a step's closing line (``assistant/message`` or ``step/end``) is durable, its streamed chunks are
  released from the live session's memory (:meth:`~dsh.services.sessions.Session.release_chunks`); the file
  keeps them for replays.
* Loading repairs a crashed session (see :mod:`._format`) and makes the repair durable before returning;
  a file with a corrupt middle is reported (file and line) and left exactly as it was.
"""

from __future__ import annotations

import errno
import fcntl
import gc
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from dsh._log import get_logger
from dsh.errors import DshError
from dsh.plugins.persistence._blobs import BlobStore
from dsh.plugins.persistence._durable import sync_directory
from dsh.plugins.persistence._format import CorruptSessionError, encode_event, encode_header, join_lines, scan_stream
from dsh.plugins.persistence._images import externalize, internalize, mentions_images
from dsh.services.sessions import (
    ChunkEvent,
    LoadedSession,
    Session,
    SessionEvent,
    SessionHeader,
    SessionInfo,
    check_session_id,
    dumps_json,
    title_from_content,
)

if TYPE_CHECKING:
    from dsh.secrets import SecretPolicy

__all__ = [
    "JsonlPersistence",
    "SessionLockedError",
    "SessionNotFoundError",
    "SessionWriteError",
    "StorageUnavailableError",
    "default_data_dir",
]

log = get_logger("dsh.persistence")
_SUFFIX = ".jsonl"
BLOBS_DIR = "blobs"
CHECKPOINTS_OWNER_SUFFIX = ".checkpoints"
"""A session's checkpoint bytes are owned by ``<session id>.checkpoints`` (:mod:`dsh.checkpoints`): released with
the session, kept apart from its images (a session holding images pays a walk on load, checkpoints need none)."""
"""The data directory's blob store (:class:`~._blobs.BlobStore`): image bytes, stored once, owned by sessions."""


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


class _StorageError(DshError):
    public = True
    """The message is meant for the client (it names the file or directory and what to do)."""

    def __init__(self, message: str, code: str | None = None, *, data_dir: str | None = None) -> None:
        super().__init__(message, code)
        self.data_dir = data_dir

    def rpc_data(self) -> dict[str, Any]:
        """What a JSON-RPC error carries besides the message."""
        data: dict[str, Any] = {"reason": "storage", "code": self.code}
        if self.data_dir is not None:
            data["dataDir"] = self.data_dir
        return data


class StorageUnavailableError(_StorageError):
    """The data directory cannot hold sessions (missing and not creatable, not a directory, not writable)."""

    default_code = "STORAGE_UNAVAILABLE"


class SessionWriteError(_StorageError, OSError):
    """A session file could not be created, written or synced (a full disk, an I/O error)."""

    default_code = "SESSION_WRITE_FAILED"


@dataclass(eq=False)
class _Writer:
    """One session file's write state. The file always holds ``synced_size`` bytes known durable, then
    ``written`` (written since the last ``fsync``); ``pending`` lines are not written yet. Both hold encoded
    lines, or text chunks as events (a :class:`ChunkEvent` always encodes; :func:`join_lines` writes it)."""

    id: str
    header: SessionHeader
    path: Path
    fd: int | None = None
    session: Session | None = None
    """The live session (to release its streamed chunks once they are durable)."""
    pending: list[bytes | ChunkEvent] = field(default_factory=list)
    pending_seq: int = 0
    """The seq after the last queued line (``pending`` ends there)."""
    written: list[bytes | ChunkEvent] = field(default_factory=list)
    written_seq: int = 0
    """The seq after the last written line."""
    size: int = 0
    """Bytes the file should have: ``synced_size`` plus ``written``."""
    synced_size: int = 0
    synced_seq: int = 0
    """The seq after the last line known durable."""
    release_mark: int = 0
    """The seq after the last event that closed a step (its chunks may go once that is durable)."""
    released: int = 0
    failure: str | None = None
    """Why the last write or sync failed (the background writer leaves the session alone until a flush)."""
    broken: str | None = None
    """Why nothing more can ever be written (an event that could not be encoded): no line after it is
    written, so the file never gets a hole in its seq sequence."""
    sync_lock: anyio.Lock = field(default_factory=anyio.Lock)


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


def _fsync(fd: int) -> None:
    os.fsync(fd)


def _reason(error: OSError) -> str:
    return error.strerror or str(error) or type(error).__name__


_SETTING = "set --data-dir or DSH_DATA_DIR (or data_dir in the config file) to a writable directory"


def _redacted_prompt(event: SessionEvent, policy: SecretPolicy | None) -> SessionEvent:
    """A user's prompt as the file stores it: every secret value *policy* (the application's; default:
    :func:`dsh.secrets.current_policy`) knows replaced, as the recording does (``secrets.redact_prompts``, on by
    default); the session in memory, and so the model's turn, keep the prompt as typed."""
    from dsh.secrets import current_policy, redact_json

    if policy is None:
        policy = current_policy()
    if not policy.redact_prompts:
        return event
    data = redact_json(event.data, policy.redactor())
    return event if data == event.data else SessionEvent(event.type, event.seq, event.time, data)


class JsonlPersistence:
    """The ``session_persistence`` service (see :class:`~dsh.services.sessions.SessionPersistence`)."""

    def __init__(self, root: Path, *, secret_policy: Callable[[], SecretPolicy | None] | None = None) -> None:
        self.root = root
        self._secret_policy = secret_policy
        """The application's secret policy, asked for at each prompt written (None: the default policy)."""
        self.blobs = BlobStore(root / BLOBS_DIR)
        """Image bytes of every session here, stored once (the log lines hold references: :mod:`._images`)."""
        self._writers: dict[str, _Writer] = {}
        self._loaded: dict[str, _Writer] = {}
        self._wakeup = anyio.Event()
        self._woken = False
        self.unavailable: str | None = None
        """Why the data directory cannot hold sessions (set by :meth:`check_root`); None: it can."""

    # -- paths ------------------------------------------------------------------------------------------

    def path_of(self, session_id: str) -> Path:
        return self.root / f"{check_session_id(session_id)}{_SUFFIX}"

    def check_root(self) -> str | None:
        """Make sure the data directory exists and takes new files (creating it if missing); return why not.

        Run at start-up and again before every operation while it fails, so a directory fixed while the
        daemon runs is picked up. The answer is kept in :attr:`unavailable`."""
        root = self.root
        try:
            root.mkdir(parents=True, exist_ok=True)
            if not root.is_dir():
                raise NotADirectoryError(errno.ENOTDIR, "not a directory")
            probe = root / f".dsh-probe-{os.getpid()}"
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.close(fd)
            probe.unlink()
        except FileExistsError:
            self.unavailable = f"cannot store sessions in {root}: it is not a directory; {_SETTING}"
        except OSError as exc:
            self.unavailable = f"cannot store sessions in {root}: {_reason(exc)}; {_SETTING}"
        else:
            self.unavailable = None
        return self.unavailable

    def _require_root(self) -> None:
        if self.unavailable is not None and self.check_root() is not None:
            raise StorageUnavailableError(self.unavailable, data_dir=str(self.root))

    # -- write path (listeners) -------------------------------------------------------------------------

    def on_created(self, session: Session) -> None:
        """Register the session's writer and create its file (header, and a fork's seed) durably, now: a
        session exists on disk from its creation, so another process can load, resume or delete it.
        Raises :class:`SessionWriteError` or :class:`StorageUnavailableError` when the file cannot be made."""
        loaded = self._loaded.pop(session.id, None)
        if loaded is not None:
            loaded.session = session
            self._writers[session.id] = loaded
            return
        if session.id in self._writers:
            return
        try:
            path = self.path_of(session.id)
        except ValueError:
            log.warning("session id is not storable; the session will not be persisted", session_id=session.id[:80])
            return
        self._require_root()
        writer = _Writer(session.id, session.header, path, session=session)
        seed = [self._encode(session.id, e) for e in session.events]  # a seeded session we did not load (a fork)
        try:
            self._create(writer, b"".join(seed))
        except OSError as exc:
            raise SessionWriteError(
                f"cannot create session file {path}: {_reason(exc)}; {_SETTING}", data_dir=str(self.root)
            ) from None
        writer.pending_seq = writer.written_seq = writer.synced_seq = session.seq
        self._writers[session.id] = writer

    def _encode(self, session_id: str, event: SessionEvent) -> bytes:
        """The event's line, with image base64 moved to the blob store (owned by *session_id*) and referenced.

        The quick test is two C-level searches of the encoded line; only a line that may hold an image is walked.
        If the store cannot take the bytes (a full disk), the line keeps them inline: nothing is lost, and the
        line's own write reports the disk."""
        if event.type == "user/message":
            event = _redacted_prompt(event, self._secret_policy() if self._secret_policy is not None else None)
        line = encode_event(event)
        if type(event) is ChunkEvent or not mentions_images(line):
            return line
        try:
            data = externalize(event.data, lambda raw: self.blobs.put(session_id, raw))
        except (OSError, ValueError) as exc:  # ValueError: an owner name the store refuses (not a session id)
            reason = _reason(exc) if isinstance(exc, OSError) else str(exc)
            log.warning("cannot store image bytes apart; kept in the log line", session_id=session_id, error=reason)
            return line
        if data is event.data:
            return line
        return dumps_json({"type": event.type, "seq": event.seq, "time": event.time, "data": data}) + b"\n"

    def on_event(self, session: Session, event: SessionEvent) -> None:
        writer = self._writers.get(session.id)
        if writer is None or writer.broken is not None:
            return
        if type(event) is ChunkEvent:  # the chunk path: queued as it is, encoded with its batch (join_lines)
            writer.pending.append(event)
            writer.pending_seq = event.seq + 1
        else:
            try:
                line = self._encode(session.id, event)
            except Exception as exc:  # never a hole: this line and every later one stay out of the file
                writer.broken = f"event {event.seq} ({event.type}) cannot be stored: {type(exc).__name__}"
                log.warning("session event cannot be encoded", session_id=session.id, seq=event.seq, type=event.type)
                return
            writer.pending.append(line)
            writer.pending_seq = event.seq + 1
            if event.type == "assistant/message" or event.type == "step/end":
                writer.release_mark = event.seq + 1
        if not self._woken:  # one wake-up per batch, not one per chunk
            self._woken = True
            self._wakeup.set()

    async def on_flush(self, session: Session) -> None:
        """Write what is queued and ``fsync``: on return everything appended so far is durable.

        On failure (a full disk, an I/O error) raises :class:`SessionWriteError`; the file is cut back to
        what was last durable (a balanced prefix that loads), and every line since stays queued in memory for
        the next flush to retry. Nothing is logged here: the caller reports the failure once."""
        writer = self._writers.get(session.id)
        if writer is None:
            return
        async with writer.sync_lock:
            try:
                self._write(writer)
                if writer.written and writer.fd is not None:
                    count, size, seq, fd = len(writer.written), writer.size, writer.written_seq, writer.fd
                    try:
                        await anyio.to_thread.run_sync(_fsync, fd)
                    except OSError:
                        self._unsync(writer)
                        raise
                    writer.synced_size, writer.synced_seq = size, seq
                    del writer.written[:count]
            except OSError as exc:
                writer.failure = _reason(exc)
                raise self._write_error(writer) from None
        if writer.failure is not None:
            writer.failure = None
            log.info("session file is writable again", session_id=writer.id)
        if writer.release_mark > writer.released and writer.session is not None:
            writer.released = min(writer.release_mark, writer.synced_seq)
            writer.session.release_chunks(writer.released)

    def _write_error(self, writer: _Writer) -> SessionWriteError:
        what = writer.broken or writer.failure or "unknown error"
        return SessionWriteError(
            f"cannot save session {writer.id} to {writer.path}: {what}; what was saved before is intact, the rest "
            "is kept in memory and saved again with the next turn",
            data_dir=str(self.root),
        )

    def on_disposed(self, session: Session) -> None:
        writer = self._writers.pop(session.id, None)
        if writer is not None:
            self._close(writer)

    async def run_writer(self) -> None:
        """Write queued lines soon after they are appended (one ``write`` per session per wake-up). A session
        whose last write failed is left to its next flush (which retries and reports); nothing is logged here
        but at debug level, so a full disk costs one log line per failed turn, not one per chunk."""
        while True:
            await self._wakeup.wait()
            self._wakeup = anyio.Event()
            self._woken = False
            for writer in list(self._writers.values()):
                if writer.pending and writer.failure is None and writer.broken is None:
                    try:
                        self._write(writer)
                    except OSError as exc:
                        writer.failure = _reason(exc)
                        log.debug("cannot write session file", session_id=writer.id, error=writer.failure)

    def close_all(self) -> None:
        for writer in [*self._writers.values(), *self._loaded.values()]:
            self._close(writer)
        self._writers.clear()
        self._loaded.clear()

    def _write(self, writer: _Writer) -> None:
        """Write the queued lines after what the file should hold; on failure the file is cut back to that
        and the lines stay queued. Raises ``OSError`` (a broken writer raises one too: it cannot catch up)."""
        if writer.broken is not None:
            raise OSError(errno.EINVAL, writer.broken)
        if not writer.pending or writer.fd is None:
            return
        fd = writer.fd
        if os.fstat(fd).st_size != writer.size:  # a failed write left part of a line: never build on it
            os.ftruncate(fd, writer.size)
        count = len(writer.pending)
        data = join_lines(writer.pending)
        try:
            _write_all(fd, data)
        except OSError:
            try:
                os.ftruncate(fd, writer.size)  # no half line left behind to be taken for a torn tail
            except OSError:
                pass  # cut before the next write (the size check above)
            raise
        writer.written.extend(writer.pending[:count])
        del writer.pending[:count]
        writer.size += len(data)
        writer.written_seq = writer.pending_seq

    def _unsync(self, writer: _Writer) -> None:
        """An ``fsync`` failed: what was written since the last one may not be on disk (the kernel may have
        dropped it), so the file is cut back to what was durable and those lines are queued again."""
        writer.pending[:0] = writer.written
        writer.written.clear()
        writer.size = writer.synced_size
        writer.written_seq = writer.synced_seq
        try:
            if writer.fd is not None:
                os.ftruncate(writer.fd, writer.synced_size)
        except OSError:
            pass  # cut before the next write

    def _create(self, writer: _Writer, first: bytes) -> None:
        """Create the file with its header (and *first* lines), atomically and durably; keep it open, locked."""
        self.root.mkdir(parents=True, exist_ok=True)
        temporary = writer.path.with_name(f".{writer.path.name}.{os.getpid()}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
        content = encode_header(writer.header) + first
        try:
            _lock(fd, temporary)
            _write_all(fd, content)
            _fsync(fd)
            if writer.path.exists():
                raise FileExistsError(errno.EEXIST, f"session file {writer.path} already exists")
            os.rename(temporary, writer.path)
        except BaseException:
            os.close(fd)
            try:
                os.unlink(temporary)
            except OSError:
                pass
            raise
        sync_directory(self.root)
        writer.fd = fd
        writer.size = writer.synced_size = len(content)

    def _close(self, writer: _Writer) -> None:
        """Last write and ``fsync`` before the file is let go; a failure is logged once (no traceback) and
        the file keeps its last sound prefix."""
        try:
            try:
                self._write(writer)
            except OSError as exc:
                log.warning("cannot save session file on close", session_id=writer.id, error=_reason(exc))
            if writer.fd is not None and writer.written:  # usually synced already by the last turn's flush
                try:
                    _fsync(writer.fd)
                except OSError as exc:
                    log.warning("cannot sync session file on close", session_id=writer.id, error=_reason(exc))
                    self._unsync(writer)
                else:
                    writer.synced_size, writer.synced_seq = writer.size, writer.written_seq
                    writer.written.clear()
        finally:
            if writer.fd is not None:
                os.close(writer.fd)  # releases the flock
                writer.fd = None

    # -- the SessionPersistence seam --------------------------------------------------------------------

    async def load(self, session_id: str) -> LoadedSession:
        """Read, repair (durably) and lock a stored session; its file stays locked while it is live here."""
        path = self.path_of(session_id)
        self._require_root()
        if session_id in self._writers or session_id in self._loaded:
            raise SessionLockedError(f"session {session_id} is already open in this dsh process")
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND)
        except FileNotFoundError:
            raise SessionNotFoundError(f"no stored session {session_id!r}") from None
        try:
            _lock(fd, path)
            length = os.fstat(fd).st_size
            collecting = gc.isenabled()
            big = length >= _BIG_LOAD
            if collecting and big:
                gc.collect(1)  # the young generations hold nothing but what the load makes (see below)
            gc.disable()
            try:
                # Read a piece at a time and parsed as it comes: the file's bytes and its events are never all
                # in memory together (the careful path, for a file the fast one does not accept, reads it whole).
                result = scan_stream(_pieces(fd), str(path), lambda: _read_all(fd))
                if big:
                    # A big history goes straight to the oldest generation, before any collection runs: a
                    # million young objects are never scanned by a young collection (one cost ~0.5 s right
                    # after the load; issue #12). freeze() + unfreeze() is that move in O(1). Freezing alone
                    # kept them, and any cyclic garbage alive at that moment, out of every collection forever:
                    # each load + close leaked the whole closed session (issue #30). The move also zeroes the
                    # oldest generation's counter (CPython 3.11), which postpones the next full collection: a
                    # fair price once per big load, not for every small one (a daemon loading small sessions
                    # every few seconds never ran a full collection), so smaller loads are left to the
                    # collector like any other objects.
                    gc.freeze()
                    gc.unfreeze()
            finally:
                if collecting:
                    gc.enable()
            if result.header.id != session_id:
                raise CorruptSessionError(f"{path}:1: the header names session {result.header.id!r}")
            if self.blobs.owned(session_id):  # only a session that stored images pays for the walk
                self._restore_images(session_id, result.events)
            if result.keep_bytes < length:
                os.ftruncate(fd, result.keep_bytes)
                log.warning("cut a torn final line", session_id=session_id, bytes=length - result.keep_bytes)
            closers = [encode_event(e) for e in result.closers]
            if closers:
                _write_all(fd, b"".join(closers))
                log.warning("closed an interrupted turn", session_id=session_id, events=len(result.closers))
            if result.keep_bytes < length or result.closers:
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        size, count = result.keep_bytes + sum(map(len, closers)), len(result.events)
        self._loaded[session_id] = _Writer(
            session_id,
            result.header,
            path,
            fd,
            pending_seq=count,
            written_seq=count,
            size=size,
            synced_size=size,
            synced_seq=count,
            release_mark=count,  # the seed's chunks may go after the first durable flush (after any replay)
        )
        return LoadedSession(result.header, result.events, owned=True)

    def _restore_images(self, session_id: str, events: list[SessionEvent]) -> None:
        """Put image base64 back in place of the references in freshly parsed *events* (each blob read once)."""
        import base64

        cache: dict[str, str | None] = {}

        def encoded(digest: str) -> str | None:
            if digest not in cache:
                try:
                    cache[digest] = base64.b64encode(self.blobs.get(digest)).decode("ascii")
                except (OSError, ValueError):
                    log.warning("an image of the session is no longer stored", session_id=session_id, blob=digest[:80])
                    cache[digest] = None
            return cache[digest]

        for event in events:
            if type(event) is not ChunkEvent:
                internalize(event.data, encoded)

    def release(self, session_id: str) -> None:
        """Give up a loaded session that never became live (its resume failed)."""
        writer = self._loaded.pop(session_id, None)
        if writer is not None:
            self._close(writer)

    async def has(self, session_id: str) -> bool:
        self._require_root()
        return self.path_of(session_id).exists()

    def _infos(self, include_empty: bool = False) -> list[SessionInfo]:
        if not self.root.is_dir():
            return []
        infos = []
        for path in self.root.iterdir():
            if path.suffix != _SUFFIX or path.name.startswith("."):
                continue
            try:
                info = _read_info(path, include_empty)
            except Exception:  # one bad file must not hide the others
                log.warning("skipping an unreadable session file", path=str(path))
                continue
            if info is not None:
                infos.append(info)
        infos.sort(key=lambda info: (-info.updated_at, info.id))
        return infos

    async def delete(self, session_id: str) -> None:
        """Remove a stored session (an unknown id is not an error). A session live here is closed first."""
        path = self.path_of(session_id)
        self._require_root()
        writer = self._writers.pop(session_id, None) or self._loaded.pop(session_id, None)
        if writer is not None:
            self._close(writer)
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            self._release_blobs(session_id)  # images a crash left behind a file that is gone
            self._drop_tool_output(session_id)
            return
        try:
            _lock(fd, path)
            path.unlink()
        finally:
            os.close(fd)
        self._release_blobs(session_id)
        self._drop_tool_output(session_id)

    def _drop_tool_output(self, session_id: str) -> None:
        """Remove the full outputs the tools spilled for the session (``<root>/tool-output/<id>/``, RFC 0018)."""
        import shutil

        directory = self.root / "tool-output" / session_id
        if directory.parent == self.root / "tool-output" and directory.is_dir():
            shutil.rmtree(directory, ignore_errors=True)

    def _release_blobs(self, session_id: str) -> None:
        """Drop the session's references to stored images; images no other owner holds are deleted."""
        try:
            for owner in (session_id, session_id + CHECKPOINTS_OWNER_SUFFIX):
                self.blobs.release(owner)
        except OSError as exc:
            log.warning("cannot delete the session's images", session_id=session_id, error=_reason(exc))

    def size_of(self, session_id: str) -> int:
        """Bytes the stored session takes: its file and the images it holds (each counted once)."""
        try:
            size = self.path_of(session_id).stat().st_size
        except FileNotFoundError:
            size = 0
        return size + self.blobs.size_of(session_id)

    async def list(self, *, include_empty: bool = False) -> list[SessionInfo]:  # last: shadows the builtin
        """Every stored session that has events, newest first (header, modification time, title), without
        loading them. A session with no event yet (created, never prompted) is left out, though it can be
        loaded, resumed and deleted; *include_empty* lists it too, marked ``empty`` (``dsh sessions list``
        counts and, with ``--all``, shows them)."""
        self._require_root()
        return await anyio.to_thread.run_sync(self._infos, include_empty)


def _pieces(fd: int) -> Iterator[bytes]:
    """The file from its start, 1 MiB at a time."""
    os.lseek(fd, 0, os.SEEK_SET)
    while piece := os.read(fd, 1 << 20):
        yield piece


def _read_all(fd: int) -> bytes:
    """The whole file, read into one object of its size: joining blocks would hold the file twice for a moment
    (a 156 MB session peaked at 2x its size before being parsed)."""
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = [os.read(fd, max(os.fstat(fd).st_size, 1 << 16))]
    while chunk := os.read(fd, 1 << 20):  # the file grew since fstat (it is locked: only in theory)
        chunks.append(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


_BIG_LOAD = 16 << 20
"""A session file at least this long (about 100,000 events) is loaded straight into the collector's oldest
generation (see :meth:`JsonlPersistence.load`); a smaller one costs a young collection a few milliseconds."""
_TITLE_SCAN_LINES = 64
_HEADER_LIMIT = 1 << 20
"""A header line is an id, a cwd and a few fields: reading one is never reading a whole session."""
_LINE_LIMIT = 16 * 1024
"""What listing reads of one line after the header: a 4 MB first message gives its title from its first bytes,
and a longer line ends the scan, so one listing reads at most the header and 64 such pieces per file (issue #30:
300 listings of a session with a 4 MB first message read 1.2 GB)."""
_TEXT = re.compile(rb'"text"\s*:\s*"((?:[^"\\]|\\.){0,2000})')


def _partial_title(line: bytes) -> str | None:
    """The title of a ``user/message`` line read only in part: its first text's start."""
    import json

    found = _TEXT.search(line)
    if found is None:
        return None
    raw = found.group(1)
    while raw:
        try:
            text = json.loads(b'"' + raw + b'"')
            break
        except ValueError:  # cut inside an escape or a multi-byte character: drop a byte and retry
            raw = raw[:-1]
    else:
        return None
    return title_from_content([{"type": "text", "text": text}])


def _read_info(path: Path, include_empty: bool = False) -> SessionInfo | None:
    """Header, mtime and title (the first user message's text) from the first lines of a file; None for a
    session with no event yet, unless *include_empty* (then it is marked ``empty``)."""
    import json

    updated = path.stat().st_mtime
    with path.open("rb") as file:
        header: dict[str, Any] = json.loads(file.readline(_HEADER_LIMIT))
        if header.get("type") != "session":
            raise ValueError("not a session file")
        title = None
        for index in range(_TITLE_SCAN_LINES):
            line = file.readline(_LINE_LIMIT)  # a longer line is not read on: it ends the scan (below)
            if not line:
                if index == 0:  # only the header: created, never used
                    return _info(header, updated, None, empty=True) if include_empty else None
                break
            if not line.endswith(b"\n"):  # cut by _LINE_LIMIT (or the file's torn end): its start only
                title = _partial_title(line) if b'"user/message"' in line else None
                break
            if b'"user/message"' not in line:
                continue
            try:
                event = json.loads(line)
            except (ValueError, RecursionError):
                break
            title = title_from_content(event.get("data", {}).get("content", []))
            break
    return _info(header, updated, title)


def _info(header: dict[str, Any], updated: float, title: str | None, *, empty: bool = False) -> SessionInfo:
    """A fork (a ``parent_session`` without a ``parent_call``: not a sub-agent's) is titled ``Fork of …``, so it
    is not a second identical row beside its source in a list or a picker."""
    if title is not None and isinstance(header.get("parent_session"), str) and header.get("parent_call") is None:
        title = f"Fork of {title}"
    return SessionInfo(
        id=str(header["id"]),
        cwd=header.get("cwd"),
        created_at=float(header.get("created_at", 0.0)),
        updated_at=updated,
        title=title,
        empty=empty,
        parent_session=parent if isinstance(parent := header.get("parent_session"), str) else None,
        parent_call=call if isinstance(call := header.get("parent_call"), str) else None,
    )
