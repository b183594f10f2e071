"""``session/fork`` (ACP unstable): a new session with a stored session's history up to now, or up to the end of
its turn ``_meta.dsh.at`` (1-based, as ``/rewind`` lists turns); the files are not touched.

Guarantees: the source is flushed first when it is open here (what the fork copies is what the client saw), then
only read; the fork is written by :func:`dsh.frontends.sessions_fork.fork_session` (a prefix of the source's log
under a header naming it as ``parent_session``, its own blob references) and opened as ``session/resume`` opens a
stored session; the answer is ``session/resume``'s with the new ``sessionId``. A bad turn is ``-32602`` naming
``_meta.dsh.at``; an unknown source is the store's not-found error; the source stays as it was in every case.
Advertised as ``sessionCapabilities.fork`` only when sessions are durable (nothing to fork otherwise).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import anyio
from pydantic import Field

from dsh import events as ev
from dsh.frontends.acp._rpc import INTERNAL_ERROR, INVALID_PARAMS, RESOURCE_NOT_FOUND, RpcError
from dsh.frontends.acp._wire import LoadSessionParams, Wire

if TYPE_CHECKING:
    from dsh.kernel import Context

__all__ = ["ForkSessionParams", "fork_session_method"]


class _Frontend(Protocol):
    """What a fork needs of the front end (a protocol: this module must not import the front end's module)."""

    def session_record(self, session_id: str) -> Any: ...

    async def resume_session(self, params: LoadSessionParams) -> dict[str, Any]: ...


class ForkSessionParams(Wire):
    session_id: str
    cwd: Path
    mcp_servers: list[dict[str, Any]] = Field(default_factory=list)
    additional_directories: list[Path] = Field(default_factory=list)
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


def _turn_of(meta: dict[str, Any] | None) -> int | None:
    ours = (meta or {}).get("dsh")
    at = ours.get("at") if isinstance(ours, dict) else None
    if at is None:
        return None
    if type(at) is not int or at < 1:
        raise RpcError(INVALID_PARAMS, "_meta.dsh.at must be a turn number (1 or more)", {"field": "_meta.dsh.at"})
    return at


async def fork_session_method(frontend: _Frontend, ctx: Context, params: ForkSessionParams) -> dict[str, Any]:
    """``session/fork`` (see the module docstring)."""
    from dsh.frontends.sessions_fork import fork_session
    from dsh.plugins.persistence import SessionNotFoundError
    from dsh.services.sessions import check_session_id

    try:
        source = check_session_id(params.session_id)
    except ValueError as exc:
        raise RpcError(INVALID_PARAMS, str(exc), {"sessionId": params.session_id[:200]}) from None
    at = _turn_of(params.meta)
    root = getattr(ctx.get("session_persistence"), "root", None)
    if root is None:
        raise RpcError(INTERNAL_ERROR, "session persistence is not configured")
    record = frontend.session_record(source)
    if record is not None:
        await ctx.parallel(ev.SESSION_FLUSH, record.handle.agent.session)
    try:
        new_id = await anyio.to_thread.run_sync(fork_session, Path(root), source, at)
    except SessionNotFoundError as exc:
        raise RpcError(RESOURCE_NOT_FOUND, str(exc), {"sessionId": source}) from None
    except ValueError as exc:
        raise RpcError(INVALID_PARAMS, str(exc), {"field": "_meta.dsh.at"}) from None
    opened = LoadSessionParams.model_validate(
        {
            "sessionId": new_id,
            "cwd": str(params.cwd),
            "mcpServers": params.mcp_servers,
            "additionalDirectories": [str(p) for p in params.additional_directories],
        }
    )
    state = await frontend.resume_session(opened)
    return {"sessionId": new_id, **state}
