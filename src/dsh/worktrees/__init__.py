"""A git worktree per session (RFC 0040): a session that asks (``_meta.dsh.worktree``, ``dsh exec --worktree``,
``worktrees: {mode: always}``) works in a checkout of its own on a new branch, so that several agents can work
on one repository without touching each other's files or the main tree.

Public names: :class:`Worktree` (a session's record), :class:`WorktreeStore` (the records of a data directory),
:class:`WorktreeRequest`, :func:`parse_request`, :class:`WorktreesConfig`, :class:`WorktreeError`,
:func:`create_worktree`, :func:`remove_worktree`, :func:`worktree_state`, :func:`merge_hint`, :class:`Created`,
:class:`Removed`, :class:`WorktreeState`, :class:`Worktrees` (the ``worktrees`` service) and
:func:`worktrees_plugin` (the service and ``/worktree``).

Importing this package starts nothing and imports no git: git runs only when a worktree is made, described or
removed, always in a worker thread.
"""

from __future__ import annotations

from dsh.worktrees._git import GitMissing
from dsh.worktrees._manage import (
    Created,
    Removed,
    WorktreeState,
    check_clean,
    create_worktree,
    merge_hint,
    remove_worktree,
    short_id,
    worktree_state,
)
from dsh.worktrees._options import WorktreeError, WorktreeRequest, WorktreesConfig, check_branch, parse_request
from dsh.worktrees._plugin import Opening, Worktrees, worktrees_plugin
from dsh.worktrees._records import WORKTREES_DIR, Worktree, WorktreeStore

__all__ = [
    "WORKTREES_DIR",
    "Created",
    "GitMissing",
    "Opening",
    "Removed",
    "Worktree",
    "WorktreeError",
    "WorktreeRequest",
    "WorktreeState",
    "WorktreeStore",
    "Worktrees",
    "WorktreesConfig",
    "check_branch",
    "check_clean",
    "create_worktree",
    "merge_hint",
    "parse_request",
    "remove_worktree",
    "short_id",
    "worktree_state",
    "worktrees_plugin",
]
