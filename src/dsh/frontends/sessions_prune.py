"""``dsh sessions prune``: remove stored sessions older than a bound, and sessions never prompted, with the blobs
(images, checkpoints) no remaining session holds.

Guarantees: a session another dsh process holds open (locked) is never removed, whatever its age or emptiness:
it is counted as kept; a session is removed as ``dsh sessions rm`` removes it (:meth:`JsonlPersistence.delete`,
blobs released by owner, its git worktree removed and its branch unless it has commits of its own, RFC 0040); a
session whose worktree has uncommitted changes is kept and counted, as ``rm`` without ``--force`` refuses it;
nothing else in the data directory is touched.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import anyio.to_thread

from dsh.plugins.persistence import JsonlPersistence, SessionLockedError, SessionNotFoundError
from dsh.worktrees import WorktreeError, WorktreeStore, check_clean, remove_worktree

__all__ = ["PruneReport", "parse_age", "prune_sessions"]

_AGE = re.compile(r"(\d+)\s*([smhdw])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_age(text: str) -> float:
    """``30d``, ``12h``, ``90m``, ``2w``, ``45s`` in seconds; ``ValueError`` naming the accepted forms."""
    match = _AGE.fullmatch(text.strip().lower())
    if match is None:
        raise ValueError(f"not an age: {text!r}; write a number and a unit: 30d, 12h, 90m, 2w or 45s")
    return int(match.group(1)) * _UNIT[match.group(2)]


@dataclass
class PruneReport:
    removed_old: list[str] = field(default_factory=list)
    removed_empty: list[str] = field(default_factory=list)
    kept_in_use: list[str] = field(default_factory=list)
    kept_worktree: list[str] = field(default_factory=list)
    """Sessions whose git worktree has uncommitted changes."""


async def prune_sessions(root: Path, older_than: float, *, now: float | None = None) -> PruneReport:
    """Remove the sessions of *root* last updated more than *older_than* seconds before *now*, and every session
    that never had a prompt (see the module docstring)."""
    persistence = JsonlPersistence(root)
    moment = time.time() if now is None else now
    report = PruneReport()
    worktrees = WorktreeStore(root)
    for info in await persistence.list(include_empty=True):
        old = info.updated_at < moment - older_than
        if not old and not info.empty:
            continue
        worktree = worktrees.get(info.id)
        if worktree is not None:
            try:
                await anyio.to_thread.run_sync(check_clean, worktree)
            except WorktreeError:
                report.kept_worktree.append(info.id)
                continue
        try:
            await persistence.delete(info.id)
        except SessionLockedError:
            report.kept_in_use.append(info.id)
            continue
        except SessionNotFoundError:
            continue
        (report.removed_old if old else report.removed_empty).append(info.id)
        if worktree is not None:
            await anyio.to_thread.run_sync(partial(remove_worktree, root, worktree, force=True))
    return report
