"""``dsh sessions fork ID [--at N]``: a new stored session holding a session's history up to now, or up to the end
of its turn N; the files are not touched.

Guarantees:

* The source is only read (no lock, nothing written): forking a session a daemon is using is safe; what the
  fork gets is what was on disk (complete lines only; an interrupted last turn is closed when the fork is
  loaded, as for any session).
* The fork is a verbatim prefix of the source's log (events, seqs, rewinds and checkpoints as they were), under a
  new header that names the source as ``parent_session`` (``dsh sessions show`` prints "forked from"): its
  model view at the fork point is exactly the source's.
* The fork holds its own references to every blob the source holds (images and checkpoint bytes), so deleting
  either session never deletes bytes the other one needs.
* The new file is written to a temporary name, synced and renamed: no half-written session is ever listed.
* A fork of a session in a git worktree (RFC 0040) works in the directory the source was started in, not in the
  source's worktree: sharing it would undo the isolation, and deleting the source would remove it under the fork.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from dsh.checkpoints import OWNER_SUFFIX, turns
from dsh.plugins.persistence import BlobStore, JsonlPersistence, write_durably
from dsh.services.sessions import SessionHeader, dumps_json

__all__ = ["fork_session"]


def fork_session(root: Path, source_id: str, at: int | None = None) -> str:
    """Fork *source_id* in the data directory *root* (up to the end of turn *at*, 1-based as ``/rewind`` lists
    turns; None: all of it); the new session's id. ``ValueError`` for a turn that does not exist; the
    sessions CLI's errors for an unknown or unreadable session."""
    from dsh.frontends.sessions_cli import complete_lines, parse_session, read_raw

    persistence = JsonlPersistence(root)
    content = complete_lines(read_raw(root, source_id))
    stored = parse_session(content, str(persistence.path_of(source_id)))
    lines = content.split(b"\n")[:-1]
    keep = len(stored.events)
    if at is not None:
        listed = turns(stored.events)
        if not 1 <= at <= len(listed):
            span = f"1 to {len(listed)}" if listed else "none"
            raise ValueError(f"session {source_id} has no turn {at} (its turns: {span})")
        keep = listed[at].seq if at < len(listed) else keep
    new_id = str(uuid.uuid4())
    from dsh.worktrees import WorktreeStore

    worktree = WorktreeStore(root).get(source_id)
    cwd = worktree.origin if worktree is not None else stored.header.cwd
    header = SessionHeader(new_id, time.time(), cwd, parent_session=source_id)
    body = (
        dumps_json({"type": "session", **header.to_json()})
        + b"\n"
        + b"".join(line + b"\n" for line in lines[1 : 1 + keep])
    )
    blobs: BlobStore = persistence.blobs
    for suffix in ("", OWNER_SUFFIX):
        for digest in blobs.owned(source_id + suffix):
            try:
                blobs.put(new_id + suffix, blobs.get(digest))
            except FileNotFoundError:
                continue  # gone already: the source cannot give it back either
    target = persistence.path_of(new_id)
    write_durably(target, body, target.with_name(f".{new_id}.fork.tmp"))
    return new_id
