"""What may ask for a worktree, checked before git sees any of it: the ``worktrees`` config section and the
request a client sends (``_meta.dsh.worktree``, ``dsh exec --worktree``).

Guarantees:

* A request is ``true`` (a worktree with our branch name ``dsh/<short id>`` from ``HEAD``), ``false`` (none, even
  when the configuration says ``always``) or an object with only ``branch`` and ``base``; anything else (another
  key such as ``path``, a wrong type) is a :class:`WorktreeError` with code ``WORKTREE_REQUEST``.
* A ``branch`` a client names is a plain branch name: ASCII letters, digits and ``._/-``, at most 100 characters,
  not starting with ``-``, ``.`` or ``/``, no ``..``, ``//``, ``/.``, ``@{``, no trailing ``/``, ``.`` or ``.lock``;
  git's own ``check-ref-format --branch`` is asked too before it is used (``HEAD`` is refused there). A ``base`` is a revision of the same alphabet plus
  ``~^``, at most 200 characters, never starting with ``-``; it is resolved with ``--end-of-options``. No client
  value can become an option of git, a path, or leave the data directory: the worktree's location is always ours.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from dsh.errors import DshError

__all__ = ["WorktreeError", "WorktreeRequest", "WorktreesConfig", "check_branch", "parse_request"]

Mode = Literal["off", "ask", "always"]


class WorktreesConfig(BaseModel):
    """``worktrees: {mode: off | ask | always}`` (RFC 0040). ``off`` (the default): a session gets a worktree
    only when it asks (``_meta.dsh.worktree``, ``dsh exec --worktree``); ``always``: every new session whose cwd
    is in a git repository gets one (a client's ``false`` opts out; where none can be made the session starts as
    usual and says why); ``ask``: a session that says nothing gets none, and the ``session/new`` answer offers one
    (``_meta.dsh.worktree.message``) for the client to put to its user (dsh cannot ask before the client knows the
    session's id); ``dsh exec`` has nobody to ask and treats it as ``off``."""

    model_config = ConfigDict(extra="forbid")
    mode: Mode = "off"


class WorktreeError(DshError):
    """A worktree that cannot be made, opened or removed: ``message`` says why and what to do, ``code`` is
    one of ``WORKTREE_REQUEST`` (bad request), ``NOT_A_REPOSITORY``, ``BARE_REPOSITORY``, ``NO_COMMIT``,
    ``BRANCH_EXISTS``, ``GIT_MISSING``, ``NO_DATA_DIR``, ``WORKTREE_DIRTY``, ``WORKTREE_REMOVED``, ``GIT_FAILED``;
    ``data`` is what a client may show (paths, the branch)."""

    def __init__(self, message: str, code: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message, code)
        self.data = data or {}


@dataclass(frozen=True, slots=True)
class WorktreeRequest:
    """A session asks for a worktree: ``branch`` None is ``dsh/<short id>``, ``base`` None is ``HEAD``."""

    branch: str | None = None
    base: str | None = None


_BRANCH = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,99}")
_BASE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/~^-]{0,199}")


def _bad(message: str) -> WorktreeError:
    return WorktreeError(message, "WORKTREE_REQUEST", {"field": "_meta.dsh.worktree"})


def check_branch(name: str) -> str:
    """*name* when it is a branch name we accept from a client (see the module's guarantees)."""
    if not _BRANCH.fullmatch(name):
        raise _bad(
            f"worktree branch {name[:120]!r}: use letters, digits and ._/- (at most 100), not starting with - . /"
        )
    if any(part in name for part in ("..", "//", "/.", "@{")) or name.endswith(("/", ".", ".lock")):
        raise _bad(f"worktree branch {name!r} is not a valid branch name")
    return name


def _check_base(value: str) -> str:
    if not _BASE.fullmatch(value) or ".." in value or "@{" in value:
        raise _bad(f"worktree base {value[:120]!r}: give a commit, branch or tag name (letters, digits, ._/~^-)")
    return value


def parse_request(value: Any) -> WorktreeRequest | Literal[False] | None:
    """The client's ``_meta.dsh.worktree``: a request, ``False`` (explicitly none) or None (nothing said)."""
    if value is None:
        return None
    if value is True:
        return WorktreeRequest()
    if value is False:
        return False
    if not isinstance(value, dict):
        raise _bad(f"_meta.dsh.worktree must be true, false or an object, got {type(value).__name__}")
    unknown = sorted(set(value) - {"branch", "base"})
    if unknown:
        raise _bad(f"_meta.dsh.worktree: unknown option {unknown[0]!r} (options: branch, base)")
    branch, base = value.get("branch"), value.get("base")
    for key, item in (("branch", branch), ("base", base)):
        if item is not None and not isinstance(item, str):
            raise _bad(f"_meta.dsh.worktree.{key} must be a string")
    return WorktreeRequest(
        branch=check_branch(branch) if branch is not None else None,
        base=_check_base(base) if base is not None else None,
    )
