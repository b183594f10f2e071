"""An in-memory ``session_persistence`` backend: what a durable backend does, minus the disk.

It follows the write path a real backend uses (capture on ``session/created``, buffer on ``session/event``,
commit on ``session/flush``), so ``resume`` can be exercised, and a test can see exactly what a backend would
have made durable: only flushed events survive a "restart" (a new App given the same :class:`MemoryStore`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dsh import events as ev
from dsh.kernel import plugin
from dsh.services.sessions import LoadedSession, Session, SessionEvent, SessionHeader, SessionInfo

if TYPE_CHECKING:
    from dsh.kernel import Context

__all__ = ["MemoryPersistence", "MemoryStore", "memory_persistence_plugin"]


@dataclass
class MemoryStore:
    """The "disk": committed headers and events by session id. Share one across Apps to simulate restarts."""

    headers: dict[str, SessionHeader] = field(default_factory=dict)
    events: dict[str, list[SessionEvent]] = field(default_factory=dict)


class MemoryPersistence:
    def __init__(self, store: MemoryStore) -> None:
        self.store = store
        self._pending: dict[str, list[SessionEvent]] = {}

    def on_created(self, session: Session) -> None:
        self.store.headers.setdefault(session.id, session.header)
        self.store.events.setdefault(session.id, [])

    def on_event(self, session: Session, event: SessionEvent) -> None:
        self._pending.setdefault(session.id, []).append(event)

    async def on_flush(self, session: Session) -> None:
        pending = self._pending.pop(session.id, [])
        committed = self.store.events.setdefault(session.id, [])
        for event in pending:
            if event.seq != len(committed):
                raise ValueError(f"session {session.id}: event seq {event.seq} != next seq {len(committed)}")
            committed.append(event)

    async def load(self, session_id: str) -> LoadedSession:
        if session_id not in self.store.headers:
            raise KeyError(f"no stored session {session_id!r}")
        return LoadedSession(self.store.headers[session_id], list(self.store.events.get(session_id, [])))

    async def list(self) -> list[SessionInfo]:
        infos = [
            SessionInfo(
                h.id, h.cwd, h.created_at, max((e.time for e in self.store.events.get(h.id, [])), default=h.created_at)
            )
            for h in self.store.headers.values()
        ]
        return sorted(infos, key=lambda info: -info.updated_at)

    async def has(self, session_id: str) -> bool:
        return session_id in self.store.headers

    async def delete(self, session_id: str) -> None:
        self.store.headers.pop(session_id, None)
        self.store.events.pop(session_id, None)


@plugin("memory_persistence", inject=("sessions",))
def memory_persistence_plugin(ctx: Context, config: MemoryStore | None) -> None:
    persistence = MemoryPersistence(config if config is not None else MemoryStore())
    ctx.on(ev.SESSION_CREATED, persistence.on_created)
    ctx.on(ev.SESSION_EVENT, persistence.on_event)
    ctx.on(ev.SESSION_FLUSH, persistence.on_flush)
    ctx.provide("session_persistence", persistence)
