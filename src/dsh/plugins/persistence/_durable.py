"""Durable whole-file writes: one place for the temporary-file, fsync, rename, directory-fsync sequence.

Guarantee of :func:`write_durably`: after it returns, *path* holds exactly *data* and survives a crash or power
loss (as far as the file system honours ``fsync``); before that, *path* is either absent or what it was, never
partial. The temporary file is created exclusively with mode 0600 beside *path* and removed on failure."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["sync_directory", "write_durably"]


def sync_directory(directory: Path) -> None:
    """Make a new entry of *directory* durable (best effort: some file systems refuse ``fsync`` on a directory)."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_durably(path: Path, data: bytes, temporary: Path) -> None:
    """Write *data* to *temporary* (new, 0600), fsync it, rename it over *path*, fsync the directory."""
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    sync_directory(path.parent)
