"""What the client said it understands at ``initialize``, read once into flags the projection and the desks test.

Every newer update is gated on one of these flags, so a client that advertises none of them (the official Python
SDK 0.12.1, acpx, CodeCompanion) gets byte for byte the frames it got before they existed (RFC 0033).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ClientFeatures"]


def _advertised(value: Any) -> bool:
    """A capability object is advertised when present and not null (``{}`` included); a boolean when true."""
    return value is not None and value is not False


@dataclass(frozen=True, slots=True)
class ClientFeatures:
    """``notices``: ``session.notices`` (``notice`` updates); ``plan``: ``plan`` (``plan_update`` /
    ``plan_removed``); ``subagents``: ``subagents`` (child sessions, ``subagent_update``, ``session_message``);
    ``compaction``: ``session.compaction`` (``compaction_update``).

    ``tool_names``: the client knows schema 1.22's ``ToolCall.name``; there is no capability for it, so it is sent
    to a client that advertised any capability introduced at or after 1.22 (the four above), never to an older
    one, whose schema models may reject or drop an unknown field."""

    notices: bool = False
    plan: bool = False
    subagents: bool = False
    compaction: bool = False

    @property
    def modern(self) -> bool:
        """The client advertised a capability of schema 1.22 or later: it reads the newer optional fields
        (``ToolCall.name``, ``PromptResponse.usage``, ``sessionCapabilities.systemPrompt`` and ``title``)."""
        return self.notices or self.plan or self.subagents or self.compaction

    @property
    def tool_names(self) -> bool:
        return self.modern

    @classmethod
    def of(cls, capabilities: dict[str, Any]) -> ClientFeatures:
        session = capabilities.get("session")
        session = session if isinstance(session, dict) else {}
        return cls(
            notices=_advertised(session.get("notices")),
            plan=_advertised(capabilities.get("plan")),
            subagents=_advertised(capabilities.get("subagents")),
            compaction=_advertised(session.get("compaction")),
        )
