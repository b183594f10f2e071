"""``ReactLoopAgent``: the concrete agent. It owns the inbox, the per-step cancel token, the turn-scoped
cancel marker, the status and the idle waiters; the driver (:mod:`dsh.loop._driver`) does the rest.

Guarantees (reference §3.1, §4.4, §4.5, §5):

* ``send`` only enqueues and returns: the status flips to ``running`` later, in the driver, so prompts sent in
  one synchronous burst are batched into one turn.
* ``steer`` while idle behaves exactly like ``send``; while running it goes to the steering FIFO.
* ``abort`` aborts only the in-flight step. ``cancel`` arms the turn-scoped marker only when there is work
  (running, a step in flight, or anything queued or steering), clears both FIFOs and aborts the step.
* ``when_idle`` is quiescence: immediate when idle with nothing queued, otherwise released by the next
  transition out of ``running`` (or the driver's silent window-1 settle); once disposed it waits for the loop
  to exit. Waiters are an internal list, not event listeners, so no plugin disposal can drop one.
* Status changes are emitted as ``agent/status`` after the waiters are released; a listener's exception is
  logged and never reaches the driver.
* After disposal ``send``, ``steer`` and ``inject`` raise :class:`AgentDisposedError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from dsh import events as ev
from dsh._log import get_logger
from dsh.kernel import CancelToken
from dsh.loop._call_ids import SessionCallIds
from dsh.loop._inbox import Inbox, InboxMessage
from dsh.services.agents import AgentOptions, AgentStatus
from dsh.services.llm import ContentBlock, MessageSource

if TYPE_CHECKING:
    from dsh.kernel import Context, Scope
    from dsh.services.sessions import Session

__all__ = ["AgentDisposedError", "ReactLoopAgent"]

log = get_logger("dsh.loop")
STOP_GRACE = 1.0
"""Seconds a disposed agent's loop gets to end its turn before its task is cancelled."""


def _user() -> MessageSource:
    """A fresh default source per message: listeners receive it and must not be able to alter the next one."""
    return {"kind": "user"}


class AgentDisposedError(RuntimeError):
    def __init__(self, agent_id: str) -> None:
        super().__init__(f'agent "{agent_id}" is disposed')


def last_turn_number(session: Session) -> int:
    """The turn number of the last ``turn/start`` in the log, or 0."""
    event = session.last("turn/start")
    return int(event.data["turn"]) if event is not None else 0


def turn_is_open(session: Session) -> bool:
    """Whether the log's last turn boundary is a ``turn/start`` (the log, not the status, decides)."""
    event = session.last("turn/start", "turn/end")
    return event is not None and event.type == "turn/start"


class ReactLoopAgent:
    def __init__(self, ctx: Context, id: str, session: Session, options: AgentOptions | None = None) -> None:
        self._ctx = ctx
        self._id = id
        self._session = session
        self._options = options or AgentOptions()
        self.inbox = Inbox()
        self._status: AgentStatus = "idle"
        self._current_abort: CancelToken | None = None
        self._cancel_requested = False
        self._cancel_reason = "cancelled"
        self._disposed = anyio.Event()
        self._done = anyio.Event()
        self._idle_waiters: list[anyio.Event] = []
        self._scope: Scope | None = None
        self._turn_lock = anyio.Lock()
        """Held by every turn and by :meth:`compact`: a compaction never interleaves with a turn."""
        self._turn: Any = None
        """The driver's bookkeeping of the current turn (``dsh.loop._driver._Turn``), for :meth:`_stop`."""
        self._call_ids = SessionCallIds(session)
        """The tool-call ids the session has used (read from its log on the first tool call)."""

    # -- the Agent interface ----------------------------------------------------------------------------

    @property
    def id(self) -> str:
        return self._id

    @property
    def session(self) -> Session:
        return self._session

    @property
    def status(self) -> AgentStatus:
        return self._status

    @property
    def options(self) -> AgentOptions:
        return self._options

    @property
    def is_disposed(self) -> bool:
        return self._disposed.is_set()

    def send(self, content: list[ContentBlock], source: MessageSource | None = None) -> None:
        """Queue a prompt; it runs in the next turn (batched with everything queued before the turn starts)."""
        self._check_alive()
        resolved = source if source is not None else _user()
        self.inbox.enqueue(InboxMessage(content, resolved))
        self._emit_queued(content, resolved, steering=False)

    def steer(self, content: list[ContentBlock], source: MessageSource | None = None) -> None:
        """Guide the running turn at its next step boundary; while idle this is :meth:`send`."""
        self._check_alive()
        if self._status != "running":
            self.send(content, source)
            return
        resolved = source if source is not None else _user()
        self.inbox.steer(InboxMessage(content, resolved))
        self._emit_queued(content, resolved, steering=True)

    def inject(self, content: list[ContentBlock], source: MessageSource | None = None) -> None:
        """Add context without a model call: into the open turn, or as a one-shot turn of its own."""
        self._check_alive()
        from dsh.loop._driver import inject

        inject(self, content, source if source is not None else _user())

    def abort(self, reason: str = "aborted") -> None:
        """Abort the in-flight step only; queued prompts stay queued."""
        if self._current_abort is not None:
            self._current_abort.abort(reason)

    def cancel(self, reason: str = "cancelled") -> None:
        """Cancel the current or about-to-start turn and drop everything queued or steering."""
        inbox = self.inbox
        if self._status == "running" or self._current_abort is not None or inbox.has_queued or inbox.has_steering:
            self._cancel_requested = True
            self._cancel_reason = reason
        inbox.clear()
        if self._current_abort is not None:
            self._current_abort.abort(reason)

    async def when_idle(self) -> None:
        """Return once the agent is quiescent: idle with nothing queued, or disposed and its loop exited."""
        if self._disposed.is_set():
            await self._done.wait()
            return
        if self._status != "running" and not self.inbox.has_queued:
            return
        waiter = anyio.Event()
        self._idle_waiters.append(waiter)
        await waiter.wait()
        if self._disposed.is_set():
            await self._done.wait()

    async def compact(self, instructions: str | None = None) -> dict[str, Any] | None:
        """Compact the conversation between turns (see :class:`~dsh.services.agents.Agent`)."""
        self._check_alive()
        from dsh.loop._driver import compact

        return await compact(self, instructions)

    # -- lifecycle --------------------------------------------------------------------------------------

    def start(self, scope: Scope) -> None:
        """Run the driver in *scope*; disposing the scope stops the loop gracefully, then awaits its exit."""
        from dsh.loop._driver import run_loop

        self._scope = scope
        scope.spawn(run_loop, self, name=f"agent-loop:{self._id}")
        scope.effect(self._stop)

    async def _stop(self) -> None:
        """Graceful stop, bounded: the turn is aborted and normally ends (and is flushed) at once. A loop still
        running after :data:`STOP_GRACE` seconds (a tool that ignores its cancel token) has its turn closed here
        as ``disposed`` (a synthetic error ``tool/result`` for the stuck call, ``step/end``, ``turn/end``;
        flushed, bounded by the same grace) and is then left to the next effect, which cancels its task; the
        loop appends nothing to a turn closed this way. Disposal can therefore never wedge on a misbehaving
        plugin, and the log stays balanced (a later load does not call the turn ``interrupted``)."""
        self.dispose_now()
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(STOP_GRACE):
                await self._done.wait()
            if self._done.is_set():
                return
            log.warning("agent loop did not stop in time; cancelling it", agent_id=self._id, grace=STOP_GRACE)
            from dsh.loop._driver import close_stuck_turn

            if close_stuck_turn(self):
                with anyio.move_on_after(STOP_GRACE):
                    try:
                        await self._ctx.sessions.flush(self._session)
                    except Exception as error:
                        log.warning("session/flush failed after a stuck turn", agent_id=self._id, error=str(error))

    def dispose_now(self) -> None:
        """Begin disposal (idempotent, infallible): wake the loop, release waiters, abort the step."""
        if self._disposed.is_set():
            return
        self._status = "disposed"
        self._disposed.set()
        self._settle_idle()
        if self._current_abort is not None:
            self._current_abort.abort("disposed")
        try:
            self._ctx.emit(ev.AGENT_STATUS, self, "disposed")
        except Exception:
            log.exception("agent/status listener failed", agent_id=self._id, status="disposed")

    async def wait_done(self) -> None:
        await self._done.wait()

    # -- driver hooks (package-private) -----------------------------------------------------------------

    def _check_alive(self) -> None:
        if self._disposed.is_set():
            raise AgentDisposedError(self._id)

    def _emit_queued(self, content: list[ContentBlock], source: MessageSource, *, steering: bool) -> None:
        try:
            self._ctx.emit(ev.AGENT_QUEUED, self, content, {"source": source, "steering": steering})
        except Exception:
            log.exception("agent/queued listener failed", agent_id=self._id)

    def _set_status(self, status: AgentStatus) -> None:
        if status == self._status or self._status == "disposed":
            return
        self._status = status
        if status != "running":
            self._settle_idle()
        try:
            self._ctx.emit(ev.AGENT_STATUS, self, status)
        except Exception:
            log.exception("agent/status listener failed", agent_id=self._id, status=status)

    def _settle_idle(self) -> None:
        waiters, self._idle_waiters = self._idle_waiters, []
        for waiter in waiters:
            waiter.set()
