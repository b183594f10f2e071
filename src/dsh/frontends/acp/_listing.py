"""``session/list``: the stored sessions, a page at a time, sub-agents' sessions left out (reached through their
parent), titles set with ``session/set_title`` shown for sessions open here."""

from __future__ import annotations

import os
from typing import Any

from dsh.frontends.acp._rpc import INVALID_PARAMS, RpcError
from dsh.frontends.acp._wire import ListSessionsParams

__all__ = ["LIST_PAGE", "iso", "list_sessions", "normal"]

LIST_PAGE = 50


def normal(path: str) -> str:
    """A lexically normal path (no file-system access): ``/a/./b/`` and ``/a/b`` are the same directory."""
    return os.path.normpath(path)


def iso(timestamp: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(timestamp, UTC).isoformat().replace("+00:00", "Z")


async def list_sessions(
    persistence: Any, params: ListSessionsParams, titles: dict[str, str], worktrees: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The page of stored sessions *params* asks for (*titles*: titles set on sessions open here). *worktrees*
    (:class:`dsh.worktrees.Worktree` by session id): such a session is listed under the directory it was started
    in (its ``cwd`` filter matches either), its branch in the title and ``_meta.dsh.worktree``."""
    if persistence is None:
        return {"sessions": []}
    if params.cwd is not None and not os.path.isabs(params.cwd):
        raise RpcError(INVALID_PARAMS, f"cwd must be an absolute path, got {params.cwd!r}", {"field": "cwd"})
    try:
        offset = int(params.cursor) if params.cursor is not None else 0
        if offset < 0:
            raise ValueError
    except ValueError:
        raise RpcError(INVALID_PARAMS, f"invalid cursor {params.cursor!r}", {"field": "cursor"}) from None
    wanted = normal(params.cwd) if params.cwd is not None else None
    worktrees = worktrees or {}

    def places(info: Any) -> set[str]:
        worktree = worktrees.get(info.id)
        return {normal(info.cwd)} | ({normal(worktree.origin)} if worktree is not None else set())

    infos = [
        info
        for info in await persistence.list()
        if info.cwd is not None
        and info.parent_call is None  # a sub-agent's session is reached through its parent
        and (wanted is None or wanted in places(info))
    ]
    page = infos[offset : offset + LIST_PAGE]
    result: dict[str, Any] = {"sessions": [_entry(info, titles.get(info.id), worktrees.get(info.id)) for info in page]}
    if offset + LIST_PAGE < len(infos):
        result["nextCursor"] = str(offset + LIST_PAGE)
    return result


def _entry(info: Any, title: str | None, worktree: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"sessionId": info.id, "cwd": info.cwd, "updatedAt": iso(info.updated_at)}
    title = title or info.title
    if worktree is not None:  # where the client opened it, the branch shown where a person looks: the title
        entry["cwd"] = worktree.origin
        title = f"[{worktree.branch}] {title or '(no title)'}"
        entry["_meta"] = {"dsh": {"worktree": {"branch": worktree.branch, "path": worktree.path}}}
    if title:
        entry["title"] = title
    return entry
