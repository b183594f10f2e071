"""Faults injected into a real daemon's restores (``DSH_PLUGINS=tests.checkpoints.restore_faults:...``), at the one
seam every restored chunk goes through (``dsh.checkpoints._files._write_chunk``).

* :func:`pause_plugin`: after the first chunk of a restore is written, the daemon writes a byte to the FIFO named by
  ``DSH_TEST_RESTORE_FIFO`` and then blocks that restore for good: the test kills the daemon there, inside the
  restore, deterministically.
* :func:`disk_full_plugin`: while the file named by ``DSH_TEST_DISK_FULL`` exists, the second chunk of every
  restored file fails with ``ENOSPC`` after half of it reached the file, as a real full disk does (a
  fault-injecting stand-in for a full disk, beside the tmpfs test that fills a real one).
"""

from __future__ import annotations

import errno
import os
import time
from typing import TYPE_CHECKING

from dsh.kernel import plugin

if TYPE_CHECKING:
    from dsh.kernel import Context

__all__ = ["DISK_FULL", "PAUSE", "disk_full_plugin", "pause_plugin"]

PAUSE = "tests.checkpoints.restore_faults:pause_plugin"
DISK_FULL = "tests.checkpoints.restore_faults:disk_full_plugin"


@plugin("tests-restore-pause")
def pause_plugin(ctx: Context, config: object) -> None:
    from dsh.checkpoints import _files

    real = _files._write_chunk
    fifo = os.environ["DSH_TEST_RESTORE_FIFO"]

    def write_chunk(fd: int, chunk: bytes) -> None:
        real(fd, chunk)
        os.fsync(fd)  # the first chunk is on disk in the temporary file
        with open(fifo, "wb") as signal:
            signal.write(b"!")
        time.sleep(3600)  # the test kills the daemon here

    _files._write_chunk = write_chunk  # type: ignore[attr-defined]


@plugin("tests-restore-disk-full")
def disk_full_plugin(ctx: Context, config: object) -> None:
    from dsh.checkpoints import _files

    real = _files._write_chunk
    flag = os.environ["DSH_TEST_DISK_FULL"]
    written: dict[int, int] = {}

    def write_chunk(fd: int, chunk: bytes) -> None:
        inode = os.fstat(fd).st_ino
        written[inode] = written.get(inode, 0) + 1
        if written[inode] >= 2 and os.path.exists(flag):
            real(fd, chunk[: len(chunk) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(fd, chunk)

    _files._write_chunk = write_chunk  # type: ignore[attr-defined]
