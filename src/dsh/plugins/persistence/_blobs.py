"""A content-addressed blob store with references counted by owner: image bytes stored once, beside the logs.

Layout under *root* (the data directory's ``blobs/``)::

    objects/<first two hex digits>/<sha256 hex>    the bytes, written once, never changed
    owners/<owner>/<sha256 hex>                    an empty file: *owner* holds a reference

An owner is whatever keeps blobs alive: a session (its id), and later a checkpoint store (its own names). The
same bytes put by two owners, or twice by one, are stored once.

Guarantees:

* :meth:`BlobStore.put` returns only once the object and the owner's reference are durable (object written to
  a temporary file, ``fsync``, renamed; directories synced): a log line that names the digest, written after,
  never refers to bytes a crash could lose. A crash between the two leaves an unused reference, dropped with
  its owner.
* :meth:`BlobStore.release` drops every reference of an owner and deletes each object no other owner holds.
  ``put`` and ``release`` hold an exclusive ``flock`` on ``blobs/.lock``, so two dsh processes sharing a data
  directory never delete an object the other just referenced.
* :meth:`BlobStore.put_file` streams: the source is hashed and copied in chunks of :data:`CHUNK` bytes (memory
  bounded by one chunk whatever the file's size), and every all-zero chunk is left as a hole, so a sparse file (or
  a run of zeros) takes no blocks in the store. :meth:`BlobStore.open` reads an object back as a stream.
* Digests and owners are checked (hex digests; owners of 1-200 ``[A-Za-z0-9._-]``, not all dots, like session
  ids): no input names a path outside *root*.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import re
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from dsh.plugins.persistence._durable import sync_directory, write_durably

__all__ = ["CHUNK", "BlobStore"]

CHUNK = 1 << 20
"""Bytes read, hashed and written at a time by :meth:`BlobStore.put_file` (and by readers of :meth:`BlobStore.open`)."""
_ZEROS = bytes(CHUNK)
_INCOMING = ".incoming-"
_STALE_INCOMING = 3600.0
"""A streamed copy left by a writer killed mid-way is removed once it is this old (seconds)."""

_DIGEST = re.compile(r"[0-9a-f]{64}")
_OWNER = re.compile(r"[A-Za-z0-9._-]{1,200}")


class BlobStore:
    """See the module docstring. Synchronous: each call is a few system calls (and one ``fsync`` per new
    object), made where the caller already does file I/O."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._swept = False

    # -- paths ------------------------------------------------------------------------------------------

    @staticmethod
    def check_digest(digest: str) -> str:
        if not _DIGEST.fullmatch(digest):
            raise ValueError(f"not a sha256 digest: {digest[:80]!r}")
        return digest

    @staticmethod
    def check_owner(owner: str) -> str:
        if not _OWNER.fullmatch(owner) or set(owner) == {"."}:
            raise ValueError(f"not a blob owner name: {owner[:80]!r}")
        return owner

    def _object(self, digest: str) -> Path:
        return self.root / "objects" / digest[:2] / self.check_digest(digest)

    def _owner_dir(self, owner: str) -> Path:
        return self.root / "owners" / self.check_owner(owner)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    # -- the store --------------------------------------------------------------------------------------

    def put(self, owner: str, data: bytes) -> str:
        """Store *data* for *owner* (once, whoever else holds it); its sha256 hex digest. Durable on return."""
        digest = hashlib.sha256(data).hexdigest()
        self._owner_dir(owner)  # checked before anything is written
        path = self._object(digest)
        with self._locked():
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                temporary = path.with_name(f".{digest}.{os.getpid()}.tmp")
                temporary.unlink(missing_ok=True)  # left by a crashed writer of this pid: we hold the lock
                write_durably(path, data, temporary)
            self._reference(owner, digest)
        return digest

    def put_file(self, owner: str, source: BinaryIO) -> tuple[str, int]:
        """Stream *source* (a binary file, read from its current position to its end) into the store for *owner*:
        ``(sha256 hex digest, size)``; durable on return. See the module docstring (chunks, holes)."""
        self._owner_dir(owner)  # checked before anything is written
        objects = self.root / "objects"
        objects.mkdir(parents=True, exist_ok=True)
        self._sweep_incoming(objects)
        temporary = objects / f"{_INCOMING}{os.getpid()}-{secrets.token_hex(6)}.tmp"
        hasher = hashlib.sha256()
        size = 0
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
        try:
            try:
                while chunk := source.read(CHUNK):
                    hasher.update(chunk)
                    size += len(chunk)
                    if len(chunk) == CHUNK and chunk == _ZEROS:
                        os.lseek(fd, CHUNK, os.SEEK_CUR)  # a hole: no block is written
                        continue
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(fd, view) :]
                os.ftruncate(fd, size)  # trailing holes count in the length
                os.fsync(fd)
            finally:
                os.close(fd)
            digest = hasher.hexdigest()
            path = self._object(digest)
            with self._locked():
                if path.exists():
                    temporary.unlink()
                else:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(temporary, path)
                    sync_directory(path.parent)
                self._reference(owner, digest)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
        return digest, size

    def _reference(self, owner: str, digest: str) -> None:
        owner_dir = self._owner_dir(owner)
        reference = owner_dir / digest
        if not reference.exists():
            owner_dir.mkdir(parents=True, exist_ok=True)
            os.close(os.open(reference, os.O_WRONLY | os.O_CREAT, 0o600))
            sync_directory(owner_dir)

    def _sweep_incoming(self, objects: Path) -> None:
        """Remove streamed copies that writers killed mid-way left behind (old ones only: another process may be
        writing a young one)."""
        if self._swept:
            return
        self._swept = True
        now = time.time()
        try:
            names = [name for name in os.listdir(objects) if name.startswith(_INCOMING)]
        except OSError:
            return
        for name in names:
            try:
                if now - os.stat(objects / name).st_mtime > _STALE_INCOMING:
                    (objects / name).unlink()
            except OSError:
                continue

    def open(self, digest: str) -> BinaryIO:
        """A binary stream of *digest*'s bytes (the caller closes it); ``FileNotFoundError`` when not held."""
        return self._object(digest).open("rb")

    def get(self, digest: str) -> bytes:
        """The bytes of *digest*; ``FileNotFoundError`` when the store does not hold them."""
        return self._object(digest).read_bytes()

    def has(self, digest: str) -> bool:
        return self._object(digest).exists()

    def owned(self, owner: str) -> list[str]:
        """The digests *owner* holds (sorted); empty when it holds none."""
        try:
            names = os.listdir(self._owner_dir(owner))
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(name for name in names if _DIGEST.fullmatch(name))

    def size_of(self, owner: str) -> int:
        """Bytes of the objects *owner* holds (each counted once)."""
        total = 0
        for digest in self.owned(owner):
            try:
                total += self._object(digest).stat().st_size
            except FileNotFoundError:
                continue
        return total

    def release(self, owner: str) -> int:
        """Drop *owner*'s references and delete the objects nobody else holds; the number of objects deleted."""
        owner_dir = self._owner_dir(owner)
        deleted = 0
        if not owner_dir.exists():  # holds nothing (most sessions): no lock, nothing created
            return 0
        with self._locked():
            digests = self.owned(owner)
            if not digests and not owner_dir.exists():
                return 0
            try:
                others = [name for name in os.listdir(self.root / "owners") if name != owner]
            except FileNotFoundError:
                others = []
            for digest in digests:
                try:
                    (owner_dir / digest).unlink()
                except FileNotFoundError:
                    pass
                if any((self.root / "owners" / other / digest).exists() for other in others):
                    continue
                try:
                    self._object(digest).unlink()
                    deleted += 1
                except FileNotFoundError:
                    pass
            try:
                for leftover in os.listdir(owner_dir):  # not a digest: never ours, but the directory must go
                    (owner_dir / leftover).unlink()
                owner_dir.rmdir()
            except FileNotFoundError:
                pass
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
        return deleted
