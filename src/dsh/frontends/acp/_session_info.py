"""``session/set_title`` and the per-turn ``PromptResponse.usage`` (RFC 0033).

Guarantees:

* ``session/set_title`` on an open session: the title is normalised (whitespace collapsed, at most 200
  characters), rejected with -32602 when empty, stored in the session's log (``session/title``: the latest one
  counts, a ``session/load`` restores it), answered only after it was logged, announced with ``session_info_update``
  and never replaced by the automatic title of the first message. A session that is stored but not open here
  answers -32602 (open it first); an unknown one -32002 (RESOURCE_NOT_FOUND).
* ``usage`` in the answer to ``session/prompt``, for a client that knows the field (the same clients that get tool
  names): the turn's totals over every model call of the turn (input, output, reasoning, cache reads and writes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from dsh.frontends.acp._rpc import INVALID_PARAMS, RESOURCE_NOT_FOUND, RpcError
from dsh.frontends.acp._wire import Wire

if TYPE_CHECKING:
    from dsh.frontends.acp._session import AcpSession
    from dsh.services.sessions import SessionEvent

__all__ = ["TITLE_EVENT", "SetTitleParams", "add_usage", "prompt_usage", "set_title_method", "stored_title"]

TITLE_EVENT = "session/title"
MAX_TITLE = 200
_FIELDS = (
    ("input_tokens", "inputTokens"),
    ("output_tokens", "outputTokens"),
    ("reasoning_tokens", "thoughtTokens"),
    ("cache_read_tokens", "cachedReadTokens"),
    ("cache_write_tokens", "cachedWriteTokens"),
)


class SetTitleParams(Wire):
    session_id: str
    title: str


class _Frontend(Protocol):
    def session_record(self, session_id: str) -> AcpSession | None: ...

    def tool_update(self, session_id: str, update: dict[str, Any]) -> None: ...

    def refuse_child(self, session_id: str) -> None: ...

    async def stored(self, session_id: str) -> bool: ...


async def set_title_method(frontend: _Frontend, params: SetTitleParams) -> dict[str, Any]:
    title = " ".join(params.title.split())[:MAX_TITLE].strip()
    if not title:
        raise RpcError(INVALID_PARAMS, "the title is empty", {"field": "title"})
    record = frontend.session_record(params.session_id)
    if record is None:
        frontend.refuse_child(params.session_id)
        if await frontend.stored(params.session_id):
            raise RpcError(
                INVALID_PARAMS,
                f"session {params.session_id} is not open here: load or resume it, then set its title",
                {"sessionId": params.session_id},
            )
        raise RpcError(RESOURCE_NOT_FOUND, f"unknown session {params.session_id!r}", {"sessionId": params.session_id})
    record.handle.agent.session.append(TITLE_EVENT, {"title": title})
    record.titled = True
    record.title = title
    frontend.tool_update(record.id, {"sessionUpdate": "session_info_update", "title": title})
    return {"title": title}


def stored_title(recorded: list[SessionEvent]) -> str | None:
    """The title a client set last (None: never set)."""
    for event in reversed(recorded):
        if event.type == TITLE_EVENT and isinstance(event.data.get("title"), str):
            return str(event.data["title"])
    return None


def add_usage(totals: dict[str, int], usage: dict[str, Any]) -> None:
    """Add one model call's usage to the turn's *totals*."""
    for key, _ in _FIELDS:
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            totals[key] = totals.get(key, 0) + value


def prompt_usage(totals: dict[str, int]) -> dict[str, Any]:
    """The ``Usage`` object of a turn's totals."""
    usage: dict[str, Any] = {
        "totalTokens": totals.get("input_tokens", 0) + totals.get("output_tokens", 0),
        "inputTokens": totals.get("input_tokens", 0),
        "outputTokens": totals.get("output_tokens", 0),
    }
    for key, name in _FIELDS[2:]:
        if key in totals:
            usage[name] = totals[key]
    return usage
