"""Path resolution against a session's roots, and the per-call grants that let one call go outside them.

Guarantees:

* :func:`resolve_path` never touches a file's content; it only asks the file system where symlinks point. The
  returned ``path`` is the *lexical* absolute path (relative input joined to ``cwd``, ``.``/``..`` folded,
  symlinks kept) because that is the name the editor knows the file by; ``real`` is the same path with every
  symlink resolved, and ``inside`` is decided on real paths only, so a symlink inside the directory that points
  out of it counts as outside, and a session directory reached through a symlink still contains its files.
* Tools never decide permission: they refuse an outside path unless :meth:`OutsideGrants.is_granted` says a gate approved
  it for *this* call.

The grant convention (for gates such as the ACP permission gate):

* A gate that approves a call touching outside paths calls ``workspace.grants.grant(execution, path)`` (an
  :class:`OutsideGrants`) for each absolute path (the paths of the tool's card locations), *before* it calls
  ``next`` (the policy's ``ask`` stage does).
* A grant covers that path and everything below it, for that one call only: it is keyed by the call's session
  id and ``call_id``, and the gate revokes it when the call ends, whatever the outcome (the built-in tools'
  ``apply`` step too, inside any gate). :meth:`OutsideGrants.revoke` does the same by hand.
* The registry belongs to one application's ``workspace`` service (not to the process: a second application in
  the same process has its own) and is bounded (the oldest calls' grants are dropped past
  :data:`MAX_GRANTED_CALLS`), so grants for calls that never ran cannot pile up.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dsh.services.tools import ToolExecution

__all__ = ["MAX_GRANTED_CALLS", "OutsideGrants", "ResolvedPath", "is_within", "resolve_path"]

MAX_GRANTED_CALLS = 1024


@dataclass(frozen=True, slots=True)
class ResolvedPath:
    """``path``: absolute and lexically normalised (what tools use and show); ``inside``: whether its real
    location lies within one of the roots; ``real``: ``path`` with every symlink resolved."""

    path: str
    inside: bool
    real: str = ""


def is_within(path: str, root: str) -> bool:
    """Whether the normalised absolute *path* is *root* or below it (a plain string test, no file access)."""
    if path == root:
        return True
    prefix = root if root.endswith(os.sep) else root + os.sep
    return path.startswith(prefix)


def resolve_path(raw: str, cwd: str, roots: Sequence[str]) -> ResolvedPath:
    """Resolve *raw* (absolute, or relative to *cwd*; ``~`` is expanded) and say whether it is inside *roots*.

    Never raises for a path that does not exist (a file about to be created resolves like any other).
    """
    expanded = os.path.expanduser(raw)
    path = os.path.normpath(os.path.join(cwd, expanded))
    real = os.path.realpath(path)
    inside = any(is_within(real, os.path.realpath(root)) for root in roots)
    return ResolvedPath(path, inside, real)


# -- grants ---------------------------------------------------------------------------------------------------


def _key(execution: ToolExecution) -> tuple[str, str]:
    agent = execution.agent
    session = agent.session.id if agent is not None else ""
    return (session, execution.call_id)


class OutsideGrants:
    """The per-call grants of one application (state of its ``workspace`` service: ``workspace.grants``), so two
    applications in one process never see each other's grants, and disposing the workspace's plugin drops them."""

    __slots__ = ("_grants",)

    def __init__(self) -> None:
        self._grants: OrderedDict[tuple[str, str], set[str]] = OrderedDict()

    def grant(self, execution: ToolExecution, path: str) -> None:
        """Allow *execution* (this one call) to use the absolute *path* and everything below it, although it lies
        outside the session's roots. Called by a permission gate after the user (or a rule, or a mode)
        approved."""
        if not os.path.isabs(path):
            raise ValueError(f"a grant needs an absolute path, got {path!r}")
        grants = self._grants
        key = _key(execution)
        granted = grants.get(key)
        if granted is None:
            granted = grants[key] = set()
            while len(grants) > MAX_GRANTED_CALLS:
                grants.popitem(last=False)
        granted.add(os.path.realpath(path))

    def is_granted(self, execution: ToolExecution, path: str, *, resolved: bool = False) -> bool:
        """Whether a gate granted *execution* the absolute *path* (itself or a directory above it). *resolved*:
        *path* is already the real path that was checked (it is not resolved a second time)."""
        granted = self._grants.get(_key(execution))
        if not granted:
            return False
        real = path if resolved else os.path.realpath(path)
        return any(is_within(real, root) for root in granted)

    def revoke(self, execution: ToolExecution) -> None:
        """Forget every grant of *execution*'s call (idempotent)."""
        self._grants.pop(_key(execution), None)

    def clear(self) -> None:
        """Forget every grant (the workspace's plugin is disposed)."""
        self._grants.clear()

    def __len__(self) -> int:
        return len(self._grants)
