"""The read ledger: what each session has read, so that it never overwrites what it has not seen.

A file's entry is its local ``(size, mtime_ns)`` and a digest of its bytes when the session read it or wrote
it. ``edit_file`` and
``write_file`` on an existing file check it first (:meth:`ReadLedger.check`): a file this session never read,
or one whose size or modification time moved since (the user saved it, a formatter ran, another session wrote
it), is refused with an error that says to read it again, and nothing is written.

Guarantees and limits:

* Entries are per session id and in memory: a resumed session after a daemon restart reads again before it
  writes (cheap, and the file may well have changed meanwhile). :meth:`forget` drops a session's entries.
* A partial read (``offset``/``limit``) counts as a read, as in the peers: the model saw the file's shape and
  can read more; what matters is that it did not write blind, and that the file did not change under it.
* A path that does not exist on the local disk (an editor-only buffer) has no stamp; it is never refused.
* A file whose stamp moved but whose bytes are the same (``touch``, ``git stash && git stash pop``, a formatter
  that changed nothing) still counts as read; its new stamp is recorded. Files over :data:`DIGEST_MAX` bytes
  are judged on the stamp alone.
* Blocking (``stat`` and reading the file to digest it): call :meth:`record` and :meth:`check` in a worker
  thread.
"""

from __future__ import annotations

import hashlib
import os

from dsh.tools._errors import ToolError
from dsh.tools._regular import open_regular

__all__ = ["ReadLedger", "Stamp", "stamp_of"]

Stamp = tuple[int, int]
"""``(size, mtime_ns)`` of a file on the local disk."""

DIGEST_MAX = 16 * 1024 * 1024


def _digest(real: str, size: int) -> bytes | None:
    if size > DIGEST_MAX:
        return None
    try:
        with open(open_regular(real, checked=False), "rb") as file:  # a FIFO must not block the check
            return hashlib.blake2b(file.read(DIGEST_MAX + 1), digest_size=16).digest()
    except (OSError, ToolError):  # ToolError: not a regular file, no digest
        return None


def stamp_of(real: str) -> Stamp | None:
    """The file's stamp, or None when it is not a regular file on this machine."""
    try:
        info = os.stat(real)
    except OSError:
        return None
    if not os.path.isfile(real):
        return None
    return info.st_size, info.st_mtime_ns


class ReadLedger:
    def __init__(self) -> None:
        self._seen: dict[str, dict[str, tuple[Stamp, bytes | None]]] = {}

    def record(self, session: str, real: str) -> None:
        """The session has now seen *real* as it is on disk (it read it, or it wrote it)."""
        stamp = stamp_of(real)
        if stamp is not None:
            self._seen.setdefault(session, {})[real] = (stamp, _digest(real, stamp[0]))

    def check(self, session: str, real: str, shown: str) -> None:
        """Raise ``NOT_READ`` / ``CHANGED_SINCE_READ`` unless the session saw *real* as it is now (blocking: a
        ``stat``)."""
        now = stamp_of(real)
        if now is None:
            return
        entry = self._seen.get(session, {}).get(real)
        if entry is None:
            raise ToolError(
                f"{shown} exists and has not been read in this session: read it with read_file first, so that "
                "nothing in it is overwritten unseen; nothing was written",
                "NOT_READ",
            )
        seen, digest = entry
        if seen != now:
            if digest is not None and seen[0] == now[0] and _digest(real, now[0]) == digest:
                self._seen[session][real] = (now, digest)  # touched, not changed
                return
            raise ToolError(
                f"{shown} changed on disk since it was last read (someone edited it, or a formatter ran): read it "
                "again with read_file and redo the change on what it holds now; nothing was written",
                "CHANGED_SINCE_READ",
            )

    def forget(self, session: str) -> None:
        self._seen.pop(session, None)
