"""A small, real file system for disk-full tests: a tmpfs of a given size mounted by the test (root only).

:func:`small_disk` yields True with the tmpfs mounted at the (new) directory, or False where this machine does not
let the test mount one (not root, no ``mount``, no ``CAP_SYS_ADMIN``): the caller then skips, saying which
fault-injecting test covers the same contract. :func:`fill` fills a file system to its last byte.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

__all__ = ["fill", "small_disk"]


@contextlib.contextmanager
def small_disk(where: Path, size: str) -> Iterator[bool]:
    """An empty tmpfs of *size* (``8m``, ``64k``) mounted at *where* (True), or False when not allowed here."""
    where.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        yield False
        return
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True)
    if done.returncode != 0:
        yield False
        return
    try:
        yield True
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def fill(directory: Path) -> Path:
    """Fill the file system of *directory* to the last byte; the filler file (remove it to free the space)."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (65536, 4096, 1):
            with contextlib.suppress(OSError):
                while os.write(fd, b"\xff" * size):
                    pass
    finally:
        os.close(fd)
    return filler
