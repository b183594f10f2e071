"""Storage faults injected into a real daemon (``DSH_PLUGINS=tests.support.faults:disk_full_plugin``).

While the marker file :func:`disk_full_marker` of the daemon's data directory exists, every write and ``fsync``
of a session file fails with ``ENOSPC`` — a write after putting half of its bytes in the file, as a real full
disk does. Removing the marker frees the disk. The test toggles the marker between prompts; nothing else of the
daemon is changed (the fault is at the persistence backend's two system-call seams).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import TYPE_CHECKING

from dsh.kernel import plugin

if TYPE_CHECKING:
    from dsh.kernel import Context

__all__ = ["DISK_FULL_PLUGIN", "disk_full_marker", "disk_full_plugin"]

DISK_FULL_PLUGIN = "tests.support.faults:disk_full_plugin"


def disk_full_marker(data_dir: Path) -> Path:
    """The file whose existence makes the daemon on *data_dir* see a full disk."""
    return data_dir.with_name(data_dir.name + ".full")


@plugin("tests-disk-full")
def disk_full_plugin(ctx: Context, config: object) -> None:
    from dsh.plugins.persistence import _jsonl

    marker = disk_full_marker(Path(os.environ["DSH_DATA_DIR"]))
    real_write_all, real_fsync = _jsonl._write_all, _jsonl._fsync

    def write_all(fd: int, data: bytes) -> None:
        if marker.exists():
            os.write(fd, data[: len(data) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_write_all(fd, data)

    def fsync(fd: int) -> None:
        if marker.exists():
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    _jsonl._write_all = write_all  # type: ignore[assignment]
    _jsonl._fsync = fsync  # type: ignore[assignment]

    def restore() -> None:
        _jsonl._write_all, _jsonl._fsync = real_write_all, real_fsync  # type: ignore[assignment]

    ctx.effect(restore)
