"""Storage faults injected into a real daemon (``DSH_PLUGINS=tests.support.faults:disk_full_plugin``).

The disk becomes full when a session file write carries the bytes :data:`FILL` (a prompt containing that word:
its turn's lines are the first to fail) and frees up when a write carries :data:`FREE` (a later prompt with that
word: the retry of everything queued succeeds). While full, every write of a session file fails with ``ENOSPC``
after putting half of its bytes in the file, as a real full disk does, and so does every ``fsync``.

Switching on content, not on a file the test touches, makes the fault land exactly on the turn that asks for it,
whatever the daemon is still doing for the turn before (its last flush may still be running when the client gets
the answer). Nothing else of the daemon is changed: the fault is at the persistence backend's two system-call
seams.
"""

from __future__ import annotations

import errno
import os
from typing import TYPE_CHECKING

from dsh.kernel import plugin

if TYPE_CHECKING:
    from dsh.kernel import Context

__all__ = ["DISK_FULL_PLUGIN", "FILL", "FREE", "disk_full_plugin"]

DISK_FULL_PLUGIN = "tests.support.faults:disk_full_plugin"
FILL = "DISK-FULL-NOW"
FREE = "DISK-FREE-AGAIN"


@plugin("tests-disk-full")
def disk_full_plugin(ctx: Context, config: object) -> None:
    from dsh.plugins.persistence import _jsonl

    state = {"full": False}
    real_write_all, real_fsync = _jsonl._write_all, _jsonl._fsync
    fill, free = FILL.encode(), FREE.encode()

    def write_all(fd: int, data: bytes) -> None:
        if fill in data:
            state["full"] = True
        if free in data:
            state["full"] = False
        if state["full"]:
            os.write(fd, data[: len(data) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_write_all(fd, data)

    def fsync(fd: int) -> None:
        if state["full"]:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    _jsonl._write_all = write_all  # type: ignore[assignment]
    _jsonl._fsync = fsync  # type: ignore[assignment]

    def restore() -> None:
        _jsonl._write_all, _jsonl._fsync = real_write_all, real_fsync  # type: ignore[assignment]

    ctx.effect(restore)
