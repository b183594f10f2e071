"""Durable sessions: the JSONL ``session_persistence`` backend (the embedded default).

See :mod:`._jsonl` for the write path and guarantees, :mod:`._format` for the file format and crash repair, and
:mod:`._blobs` / :mod:`._images` for image bytes: stored once in the data directory's ``blobs/`` (a content-addressed
store with references counted per owner, reusable by a checkpoint store), referenced from the log lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from dsh import events as ev
from dsh.kernel import plugin
from dsh.plugins.persistence._blobs import BlobStore
from dsh.plugins.persistence._durable import write_durably
from dsh.plugins.persistence._format import CorruptSessionError, scan
from dsh.plugins.persistence._jsonl import JsonlPersistence, SessionLockedError, SessionNotFoundError, default_data_dir

if TYPE_CHECKING:
    from dsh.kernel import Context

__all__ = [
    "write_durably",
    "BlobStore",
    "CorruptSessionError",
    "JsonlPersistence",
    "SessionLockedError",
    "SessionNotFoundError",
    "default_data_dir",
    "jsonl_persistence_plugin",
    "scan",
]


@plugin("jsonl_persistence", inject=("sessions",))
def jsonl_persistence_plugin(ctx: Context, data_dir: str | Path | None) -> None:
    """Provide ``session_persistence`` backed by JSONL files in *data_dir* (default: :func:`default_data_dir`).

    Load it before the plugins that create sessions, so that it is disposed after them (LIFO) and their
    closing events still reach the disk.
    """
    persistence = JsonlPersistence(
        Path(data_dir) if data_dir is not None else default_data_dir(),
        secret_policy=lambda: ctx.get("secret_policy"),
    )
    persistence.check_root()  # a bad directory is reported by the front end (start-up) and by every session call
    ctx.effect(persistence.close_all)
    ctx.on(ev.SESSION_CREATED, persistence.on_created)
    ctx.on(ev.SESSION_EVENT, persistence.on_event)
    ctx.on(ev.SESSION_FLUSH, persistence.on_flush)
    ctx.on(ev.SESSION_DISPOSED, persistence.on_disposed)
    ctx.spawn(persistence.run_writer, name="jsonl-writer")
    ctx.provide("session_persistence", persistence)
