"""Read a file dsh found on its own, only when it is a regular file inside where it belongs, and only as much as
the caller can use.

Guarantees of :func:`read_inside`:

* The file's *real* path (every symlink resolved) must lie inside the real path of one of *roots*; a project
  file symlinked to ``/proc/self/environ``, to ``~/.ssh`` or to another project is refused before it is opened.
* The real path is opened with ``O_NOFOLLOW`` (a last component swapped for a symlink after the check fails) and
  ``O_NONBLOCK`` (a FIFO planted under the name cannot block the daemon), and must be a regular file (``fstat``).
* At most *limit* bytes are read, whatever the file's size: a 1 GiB ``AGENTS.md`` costs *limit* bytes of memory.
  :attr:`Read.size` is the size ``fstat`` reported, so the caller can say how much was left out.

Not covered: a directory above the file swapped for a symlink between the check and the open (the caller's
roots are the user's own project and config directories, not a path the model chose; ``dsh.tools`` walks
component by component for the paths the model gives), hard links and bind mounts.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FileRefused", "Read", "read_inside"]

_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
_PIECE = 64 * 1024


class FileRefused(ValueError):
    """The file is not one dsh reads on its own: outside its roots, not a regular file, or not openable."""


@dataclass(frozen=True, slots=True)
class Read:
    data: bytes
    """At most the *limit* bytes asked for, from the start of the file."""
    size: int
    """The file's size when it was opened (``fstat``)."""
    real: str
    """The real path that was read."""

    @property
    def complete(self) -> bool:
        return len(self.data) >= self.size


def _inside(real: str, roots: Iterable[str | Path]) -> bool:
    for root in roots:
        base = os.path.realpath(root)
        if real == base or real.startswith(base.rstrip(os.sep) + os.sep):
            return True
    return False


def read_inside(path: str | Path, roots: Iterable[str | Path], limit: int) -> Read:
    """The first *limit* bytes of *path*, when its real path is inside one of *roots* and it is a regular file;
    else :class:`FileRefused` naming the reason (an :class:`OSError` of the open or read is turned into one)."""
    real = os.path.realpath(path)
    roots = list(roots)
    if not _inside(real, roots):
        raise FileRefused(f"its real path {real} is outside {', '.join(str(r) for r in roots)}")
    try:
        fd = os.open(real, _FLAGS)
    except OSError as exc:
        raise FileRefused(f"cannot open {real}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileRefused(f"{real} is not a regular file")
        pieces: list[bytes] = []
        left = limit
        while left > 0:
            piece = os.read(fd, min(left, _PIECE))
            if not piece:
                break
            pieces.append(piece)
            left -= len(piece)
        return Read(b"".join(pieces), info.st_size, real)
    except OSError as exc:
        raise FileRefused(f"cannot read {real}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
