"""The ``session_persistence`` seam: what a durable backend offers the loop's ``resume``.

It is not one of the five interface services (nothing requires it: a demo without persistence still works),
so the loop reads it with ``ctx.get("session_persistence")`` at resume time instead of injecting it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from dsh.services.sessions._session import SessionEvent, SessionHeader

__all__ = ["LoadedSession", "SessionInfo", "SessionPersistence"]


@dataclass(frozen=True, slots=True)
class LoadedSession:
    header: SessionHeader
    events: list[SessionEvent]
    owned: bool = False
    """True when the events' data were freshly parsed from JSON (strictly) and are handed over: the session
    adopts them without a validating copy."""


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """What ``list`` tells about a stored session without loading it (``updated_at``: last write)."""

    id: str
    cwd: str | None
    created_at: float
    updated_at: float
    title: str | None = None
    empty: bool = False
    """Created but never used (no event yet): left out of ``list()`` unless asked for (``dsh sessions list --all``)."""
    parent_session: str | None = None
    """A sub-agent's session names its parent: front ends leave it out of their listings unless asked."""


class SessionPersistence(Protocol):
    async def load(self, session_id: str) -> LoadedSession:
        """The stored header and events (after crash repair); raises ``KeyError`` for an unknown id."""
        ...

    async def list(self) -> list[SessionInfo]:
        """Every stored session, most recently updated first."""
        ...

    async def has(self, session_id: str) -> bool: ...

    async def delete(self, session_id: str) -> None: ...
