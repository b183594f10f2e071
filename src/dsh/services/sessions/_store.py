"""The session store service (``ctx.sessions``): the live sessions of this process.

Guarantees:

* ``prepare`` builds a session without making it live; ``enter`` makes it live (its appends emit
  ``session/event``) and returns the detacher; ``announce`` emits ``session/created``. ``create`` does all
  three and ties the detach to the calling scope.
* Ids are unique among live sessions; a header ``cwd`` must be absolute.
* ``flush(session)`` awaits every ``session/flush`` listener (the durability checkpoint), in parallel.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from dsh import events as ev
from dsh._log import get_logger
from dsh.kernel import Disposer, current_scope, plugin
from dsh.services.sessions._session import ChunkEvent, Session, SessionEvent, SessionHeader

if TYPE_CHECKING:
    from dsh.kernel import Context

__all__ = ["SessionStore", "check_session_id", "ignores_text_chunks"]

IGNORES_TEXT_CHUNKS = "dsh_ignores_text_chunks"
_Listener = TypeVar("_Listener", bound=Callable[..., Any])


def ignores_text_chunks(listener: _Listener) -> _Listener:
    """Mark a ``session/event`` listener that has nothing to do for a streamed text chunk (a
    :class:`ChunkEvent`): the session does not call it for those, which are nearly every event of a turn (a
    call that returns at once is still about 3 % of the chunk path, RFC 0007). Every other event reaches it as
    usual, in registration order. Works on functions and, through them, on the bound methods made of them."""
    setattr(listener, IGNORES_TEXT_CHUNKS, True)
    return listener


log = get_logger("dsh.sessions")
_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")


def check_session_id(session_id: object) -> str:
    """Return *session_id* if it is safe as a file name: 1-128 of ``[A-Za-z0-9._-]``, not all dots.

    Ids that come from clients reach file names; this is the one gate, so no input can name a path.
    """
    if (
        not isinstance(session_id, str)
        or not 1 <= len(session_id) <= 128
        or not _ID_CHARS.issuperset(session_id)
        or set(session_id) == {"."}
    ):
        shown = repr(session_id)[:60]
        raise ValueError(f"invalid session id {shown}: use 1-128 characters of A-Z a-z 0-9 . _ -")
    return session_id


class SessionStore:
    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._live: dict[str, Session] = {}
        self._counter = itertools.count(1)

    def prepare(
        self,
        id: str | None = None,
        *,
        seed: Sequence[SessionEvent] = (),
        meta: dict[str, Any] | None = None,
        seed_owned: bool = False,
    ) -> Session:
        """Build a session (not yet live). ``meta`` may hold ``cwd``, ``parent_session``, ``parent_call``, ``created_at``;
        ``seed_owned`` as for :class:`Session`."""
        meta = meta or {}
        if id is None:
            id = f"session-{next(self._counter)}"
            while id in self._live:
                id = f"session-{next(self._counter)}"
        if id in self._live:
            raise ValueError(f"session {id!r} already exists")
        cwd = meta.get("cwd")
        if cwd is not None and (not isinstance(cwd, str) or not os.path.isabs(cwd)):
            raise ValueError(f"session cwd must be an absolute path, got {cwd!r}")
        header = SessionHeader(
            id=id,
            created_at=float(meta["created_at"]) if meta.get("created_at") is not None else time.time(),
            cwd=cwd,
            parent_session=meta.get("parent_session"),
            parent_call=meta.get("parent_call"),
        )
        return Session(header, seed, seed_owned=seed_owned)

    def enter(self, session: Session) -> Disposer:
        """Make *session* live: appends now emit ``session/event`` to every listener, in order; a listener that
        raises does not keep the event from the listeners after it, and the first exception is re-raised to the
        appender once all have run. Returns the detacher, which emits ``session/disposed`` once the session is
        no longer live."""
        if session.id in self._live:
            raise ValueError(f"session {session.id!r} already exists")
        self._live[session.id] = session
        listeners_of = self._ctx.app.bus.table.get
        name = ev.SESSION_EVENT.name
        chunk_listeners: tuple[Callable[..., Any], ...] = ()
        chunks_of: tuple[Callable[..., Any], ...] | None = None  # the listener tuple chunk_listeners was made from

        def notify(s: Session, event: SessionEvent) -> None:
            # Every listener sees every event, even when one before it raises (a throwing plugin must not hide
            # the turn from the front end or from persistence); the first exception then reaches the appender.
            # Text chunks skip the listeners marked with ignores_text_chunks (nearly every event is one).
            nonlocal chunk_listeners, chunks_of
            listeners = listeners_of(name, ())
            if type(event) is ChunkEvent:
                if listeners is not chunks_of:
                    chunks_of = listeners
                    chunk_listeners = tuple(one for one in listeners if not getattr(one, IGNORES_TEXT_CHUNKS, False))
                listeners = chunk_listeners
            failure: Exception | None = None
            for listener in listeners:
                try:
                    listener(s, event)
                except Exception as error:
                    if failure is None:
                        failure = error
            if failure is not None:
                raise failure

        session._hook = notify

        def detach() -> None:
            if self._live.get(session.id) is session:
                del self._live[session.id]
            if session._hook is notify:
                session._hook = None
                try:
                    self._ctx.emit(ev.SESSION_DISPOSED, session)
                except Exception:
                    log.exception("session/disposed listener failed", session_id=session.id)

        scope = current_scope() or self._ctx.scope
        return scope.effect(detach)

    def announce(self, session: Session) -> None:
        self._ctx.emit(ev.SESSION_CREATED, session)

    def create(
        self, id: str | None = None, *, seed: Sequence[SessionEvent] = (), meta: dict[str, Any] | None = None
    ) -> Session:
        """prepare + enter + announce; the session is detached when the calling scope is disposed."""
        session = self.prepare(id, seed=seed, meta=meta)
        self.enter(session)
        self.announce(session)
        return session

    def get(self, id: str) -> Session | None:
        return self._live.get(id)

    def list(self) -> list[Session]:
        return list(self._live.values())

    async def flush(self, session: Session) -> None:
        """Await every ``session/flush`` listener (parallel); their failure propagates."""
        await self._ctx.parallel(ev.SESSION_FLUSH, session)


@plugin("sessions")
def sessions_plugin(ctx: Context, config: object) -> None:
    """Provide the default in-memory :class:`SessionStore` as ``sessions``."""
    ctx.provide("sessions", SessionStore(ctx))
