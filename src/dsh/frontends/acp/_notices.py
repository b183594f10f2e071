"""``session/notice`` (:mod:`dsh.notices`) on the wire: a ``notice`` update for a client that advertised
``session.notices``, the notice's fallback for any other (RFC 0033).

Guarantees: a notice for a session this front end does not serve is ignored (another front end's); a notice is
sent at most once, on its own session's stream (a sub-agent's on the child's session when the client sees child
sessions, else on the parent's); the fallback card is one failed ``tool_call`` with the title as both its title
and its text, exactly the card MCP server failures always were.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dsh.frontends.acp._features import ClientFeatures
    from dsh.notices import Notice

__all__ = ["notice_updates"]

_cards = itertools.count(1)


def notice_updates(notice: Notice, features: ClientFeatures) -> list[dict[str, Any]]:
    """The updates that show *notice* to a client with *features* (empty: the log line is all it gets)."""
    if features.notices:
        update: dict[str, Any] = {"sessionUpdate": "notice", "severity": notice.severity, "title": notice.title}
        if notice.description:
            update["description"] = notice.description
        if notice.source:
            update["_meta"] = {"dsh": {"source": notice.source}}
        return [update]
    text = notice.title if not notice.description else f"{notice.title}\n{notice.description}"
    if notice.fallback == "card":
        return [
            {
                "sessionUpdate": "tool_call",
                "toolCallId": notice.key or f"notice-{next(_cards)}",
                "title": notice.title,
                "kind": "other",
                "status": "failed",
                "content": [{"type": "content", "content": {"type": "text", "text": text}}],
            }
        ]
    if notice.fallback == "message":
        return [{"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": f"\n{text}\n"}}]
    return []
