"""Worktree sessions on the wire (RFC 0040): ``_meta.dsh.worktree`` in ``session/new``, the worktree's cwd on
``session/load`` / ``session/resume``, the branch in ``session/list``, the worktree's removal on
``session/delete`` (``_meta.dsh.force`` discards uncommitted changes).

Guarantees: every :class:`~dsh.worktrees.WorktreeError` becomes a JSON-RPC error whose ``data.reason`` is its
code (``invalid_params`` for what the client or the repository can change, ``resource_not_found`` for a worktree
removed by hand, ``internal_error`` for git failing); without the ``worktrees`` service nothing here changes
what a session does.
"""

from __future__ import annotations

from typing import Any

from dsh.frontends.acp._rpc import INTERNAL_ERROR, INVALID_PARAMS, RESOURCE_NOT_FOUND, RpcError
from dsh.worktrees import Created, Opening, Removed, Worktree, WorktreeError, Worktrees, parse_request

__all__ = ["delete_worktree", "force_of", "new_session_worktree", "rpc_error", "worktree_answer", "worktree_meta"]


def rpc_error(error: WorktreeError) -> RpcError:
    code = {"WORKTREE_REMOVED": RESOURCE_NOT_FOUND, "GIT_FAILED": INTERNAL_ERROR}.get(error.code or "", INVALID_PARAMS)
    return RpcError(code, error.message, {"reason": error.code, **error.data})


def _dsh_meta(meta: dict[str, Any] | None) -> dict[str, Any]:
    value = (meta or {}).get("dsh")
    return value if isinstance(value, dict) else {}


def force_of(meta: dict[str, Any] | None) -> bool:
    """``_meta.dsh.force: true`` on ``session/delete``."""
    return _dsh_meta(meta).get("force") is True


async def new_session_worktree(service: Worktrees | None, session_id: str, cwd: str, meta: Any) -> Opening:
    """The worktree a new session asks for (or the configuration gives it); raises the RpcError to answer."""
    try:
        requested = parse_request(_dsh_meta(meta if isinstance(meta, dict) else None).get("worktree"))
        if service is None:
            if requested:
                raise WorktreeError("worktrees are not available in this daemon", "NO_DATA_DIR")
            return Opening(None)
        return await service.for_new_session(session_id, cwd, requested)
    except WorktreeError as error:
        raise rpc_error(error) from None


def worktree_meta(record: Worktree) -> dict[str, Any]:
    return {"branch": record.branch, "path": record.path, "repo": record.repo, "base": record.base}


def worktree_answer(opening: Opening) -> dict[str, Any]:
    """``_meta.dsh.worktree`` of the ``session/new`` answer: where the session works, or why not in a worktree."""
    created: Created | None = opening.created
    if created is not None:
        info = {
            **worktree_meta(created.worktree),
            "detached": created.detached,
            "mainTreeChanges": created.main_dirty,
            "message": created.summary(),
        }
        return {"_meta": {"dsh": {"worktree": info}}}
    if opening.note is not None:
        return {"_meta": {"dsh": {"worktree": {"message": opening.note}}}}
    return {}


async def delete_worktree(
    service: Worktrees | None, session_id: str, *, force: bool, check_only: bool
) -> Removed | None:
    """``check_only``: refuse now (``WORKTREE_DIRTY``) what removing would refuse, touching nothing; otherwise
    remove the worktree (forced: the check was made before the session was deleted)."""
    if service is None or service.get(session_id) is None:
        return None
    try:
        if check_only:
            if not force:
                await service.check_removable(session_id)
            return None
        return await service.remove(session_id, force=True)
    except WorktreeError as error:
        raise rpc_error(error) from None
