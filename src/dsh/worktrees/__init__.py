"""A git worktree per session (RFC 0040): a session that asks (``_meta.dsh.worktree``, ``dsh exec --worktree``,
``worktrees: {mode: always}``) works in a checkout of its own on a new branch, so that several agents can work
on one repository without touching each other's files or the main tree.

Public names: :class:`Worktree` (a session's record), :class:`WorktreeStore` (the records of a data directory),
:class:`WorktreeRequest`, :func:`parse_request`, :class:`WorktreesConfig`, :class:`WorktreeError`,
:func:`create_worktree`, :func:`remove_worktree`, :func:`worktree_state`, :func:`merge_hint`, :class:`Created`,
:class:`Removed`, :class:`WorktreeState`, :class:`Worktrees` (the ``worktrees`` service) and
:func:`worktrees_plugin` (the service and ``/worktree``).

Importing this package starts nothing and imports only the config model and the request checks (the configuration
file loads them); the rest loads on first use. git runs only when a worktree is made, described or removed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dsh.worktrees._options import WorktreeError, WorktreeRequest, WorktreesConfig, parse_request

if TYPE_CHECKING:
    from dsh.worktrees._manage import Created, Removed, check_clean, merge_hint, remove_worktree, worktree_state
    from dsh.worktrees._plugin import Opening, Worktrees, worktrees_plugin
    from dsh.worktrees._records import Worktree, WorktreeStore

__all__ = [
    "Created",
    "Opening",
    "Removed",
    "Worktree",
    "WorktreeError",
    "WorktreeRequest",
    "WorktreeStore",
    "Worktrees",
    "WorktreesConfig",
    "check_clean",
    "merge_hint",
    "parse_request",
    "remove_worktree",
    "worktree_state",
    "worktrees_plugin",
]


_LAZY = {
    "Created": "_manage",
    "Removed": "_manage",
    "check_clean": "_manage",
    "merge_hint": "_manage",
    "remove_worktree": "_manage",
    "worktree_state": "_manage",
    "Opening": "_plugin",
    "Worktrees": "_plugin",
    "worktrees_plugin": "_plugin",
    "Worktree": "_records",
    "WorktreeStore": "_records",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dsh.worktrees' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"dsh.worktrees.{module}"), name)
