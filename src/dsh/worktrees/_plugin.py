"""The ``worktrees`` service and ``/worktree``.

Guarantees:

* :meth:`Worktrees.for_new_session` decides from the client's request and the configured mode whether a new
  session gets a worktree: an explicit request that cannot be met is a :class:`WorktreeError` (the session is
  not created); ``mode: always`` outside a git repository (or in a bare one) starts the session without a
  worktree and says why (:attr:`Opening.note`).
* Git runs in a worker thread, never on the event loop.
* :meth:`Worktrees.reopen` refuses a worktree session whose directory was removed by hand
  (``WORKTREE_REMOVED``, saying whether the branch is still there and how to get the worktree back).
* ``/worktree`` shows the session's worktree and how to merge it, or how to start a session in one; it never
  moves a running session (its cwd, roots, system prompt and stored header stay what they were: RFC 0040).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from dsh._log import get_logger
from dsh.kernel import plugin
from dsh.worktrees._manage import (
    Created,
    Removed,
    check_clean,
    create_worktree,
    merge_hint,
    remove_worktree,
    worktree_state,
)
from dsh.worktrees._options import WorktreeError, WorktreeRequest, WorktreesConfig
from dsh.worktrees._records import Worktree, WorktreeStore

if TYPE_CHECKING:
    from dsh.kernel import Context

__all__ = ["ASK_NOTE", "Opening", "Worktrees", "worktrees_plugin"]

log = get_logger("dsh.worktrees")

_FALLBACK = frozenset({"NOT_A_REPOSITORY", "BARE_REPOSITORY", "NO_COMMIT", "GIT_MISSING"})
"""Why ``mode: always`` starts a session without a worktree instead of refusing it."""


ASK_NOTE = (
    "worktrees: ask: this session works in the main tree; a session of its own in a git worktree is started with "
    "_meta.dsh.worktree: true in session/new (dsh exec --worktree)"
)
"""What a session told nothing gets under ``mode: ask``: the offer, for the client to put to its user."""


@dataclass(frozen=True, slots=True)
class Opening:
    created: Created | None
    note: str | None = None
    """Why a session that the configuration would have put in a worktree has none."""


class Worktrees:
    """The sessions' worktrees in one data directory (None: sessions are not stored, so there are none)."""

    def __init__(self, config: WorktreesConfig | None, data_dir: str | None) -> None:
        self.config = config or WorktreesConfig()
        self.data_dir = data_dir
        self.store = WorktreeStore(data_dir) if data_dir is not None else None

    @property
    def mode(self) -> str:
        return self.config.mode

    def _need_store(self) -> WorktreeStore:
        if self.store is None or self.data_dir is None:
            raise WorktreeError(
                "worktree sessions need a data directory (sessions are not stored in this run)", "NO_DATA_DIR"
            )
        return self.store

    async def for_new_session(
        self, session_id: str, cwd: str, requested: WorktreeRequest | Literal[False] | None
    ) -> Opening:
        """The worktree of a new session, made now, or None (see the module's guarantees)."""
        from anyio import to_thread

        if requested is None and self.mode == "ask":  # dsh cannot ask before the client knows the session
            return Opening(None, ASK_NOTE)
        if requested is False or (requested is None and self.mode != "always"):
            return Opening(None)
        explicit = requested is not None
        request = requested or WorktreeRequest()
        try:
            self._need_store()
            assert self.data_dir is not None
            created = await to_thread.run_sync(create_worktree, self.data_dir, session_id, cwd, request)
        except WorktreeError as error:
            if explicit or error.code not in _FALLBACK:
                raise
            log.info("no worktree for the session", session_id=session_id, reason=error.message)
            return Opening(None, f"worktrees: always, but no worktree for this session: {error.message}")
        log.info("worktree made", session_id=session_id, path=created.worktree.path, branch=created.worktree.branch)
        return Opening(created)

    def get(self, session_id: str) -> Worktree | None:
        return self.store.get(session_id) if self.store is not None else None

    def listing(self) -> dict[str, Worktree]:
        """Every session's worktree record, by session id."""
        return self.store.all() if self.store is not None else {}

    async def reopen(self, session_id: str) -> Worktree | None:
        """The worktree of a stored session being opened again; ``WORKTREE_REMOVED`` when it is gone."""
        from anyio import to_thread

        record = self.get(session_id)
        if record is None:
            return None
        error = await to_thread.run_sync(_gone, record)
        if error is not None:
            raise error
        return record

    async def remove(self, session_id: str, *, force: bool = False) -> Removed | None:
        """Remove the session's worktree (None: it has none); ``WORKTREE_DIRTY`` refuses without *force*."""
        from anyio import to_thread

        record = self.get(session_id)
        if record is None or self.data_dir is None:
            return None
        return await to_thread.run_sync(lambda: remove_worktree(self.data_dir or "", record, force=force))

    async def check_removable(self, session_id: str) -> None:
        """Raise ``WORKTREE_DIRTY`` when removing the session's worktree would lose uncommitted changes."""
        from anyio import to_thread

        record = self.get(session_id)
        if record is not None:
            await to_thread.run_sync(check_clean, record)

    async def describe(self, session_id: str) -> str | None:
        """``dsh sessions show``'s and ``/worktree``'s text for the session's worktree (None: it has none)."""
        from anyio import to_thread

        record = self.get(session_id)
        if record is None:
            return None
        state = await to_thread.run_sync(worktree_state, record)
        return merge_hint(record, state)


def _gone(record: Worktree) -> WorktreeError | None:
    return None if os.path.isdir(record.path) else removed_error(record)


def removed_error(record: Worktree) -> WorktreeError:
    """The worktree directory of *record* is gone: the error that says so and how to get it back."""
    from dsh.worktrees._git import git

    branch = (
        git(["rev-parse", "--verify", "--quiet", f"refs/heads/{record.branch}"], record.repo).ok
        if os.path.isdir(record.repo)
        else False
    )
    if branch:
        back = (
            f"the branch {record.branch} is still there: `git -C {shlex.quote(record.repo)} worktree prune && "
            f"git -C {shlex.quote(record.repo)} worktree add {shlex.quote(record.path)} {record.branch}` brings it back"
        )
    else:
        back = f"the branch {record.branch} is gone too"
    return WorktreeError(
        f"the worktree of session {record.session_id} ({record.path}) was removed by hand; {back}, or delete "
        "the session",
        "WORKTREE_REMOVED",
        {"path": record.path, "branch": record.branch, "branchExists": branch},
    )


@plugin("worktrees", inject=("commands",))
def worktrees_plugin(ctx: Context, config: Mapping[str, Any] | None) -> None:
    """*config*: ``{"config": WorktreesConfig | None, "data_dir": str | None}``; provides ``worktrees`` and
    registers ``/worktree``."""
    config = config or {}
    data_dir = config.get("data_dir")
    service = Worktrees(config.get("config"), str(data_dir) if data_dir is not None else None)
    ctx.provide("worktrees", service)

    from dsh.commands import CommandResult, Invocation

    async def handler(invocation: Invocation) -> CommandResult:
        try:
            text = await service.describe(invocation.agent.session.id)
        except WorktreeError as error:  # git missing, or failing on a broken worktree: say so, never crash
            text = f"The worktree of this session cannot be read: {error.message}"
        if text is None:
            text = (
                "This session works in the main tree. A session starts in a git worktree of its own when it asks: "
                "`_meta.dsh.worktree: true` in session/new, `dsh exec --worktree`, or `worktrees: {mode: always}` "
                "in the configuration (a running session does not move)."
            )
        return CommandResult(text=text)

    ctx.commands.register("worktree", "Show this session's git worktree and how to merge it", handler)
