"""``LoopState``: everything about one agent that changes while it runs, and the transitions that keep it
consistent, in one object.

``ReactLoopAgent`` (:mod:`dsh.loop._agent`) is the public face: the :class:`~dsh.services.agents.Agent`
interface, each method a call on its ``LoopState``. The driver (:mod:`dsh.loop._driver`) runs turns and steps on
the same ``LoopState``. Neither reaches into the other's private fields: the fields below are the package's
shared state, public within ``dsh.loop`` and documented here, and the transitions that must stay atomic with
respect to each other (status and idle waiters, the cancel marker and the step's token, disposal) are methods
here, so each rule is written once.

Guarantees (reference §3.1, §4.4, §4.5, §5):

* ``cancel`` arms the turn-scoped marker only when there is work (running, a step in flight, or anything queued
  or steering), clears both FIFOs and aborts the step; ``abort`` aborts only the in-flight step.
* ``when_idle`` is quiescence: immediate when idle with nothing queued, otherwise released by the next
  transition out of ``running`` (or the driver's silent window-1 settle); once disposed it waits for the loop
  to exit. Waiters are an internal list, not event listeners, so no plugin disposal can drop one.
* Status changes are emitted as ``agent/status`` after the waiters are released; a listener's exception is
  logged and never reaches the driver. Once ``disposed``, the status never changes again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from dsh import events as ev
from dsh._log import get_logger
from dsh.loop._call_ids import SessionCallIds
from dsh.loop._inbox import Inbox

if TYPE_CHECKING:
    from dsh.kernel import CancelToken, Context, Scope
    from dsh.loop._agent import ReactLoopAgent
    from dsh.loop._driver import Turn
    from dsh.services.agents import AgentStatus
    from dsh.services.sessions import Session

__all__ = ["AgentDisposedError", "LoopState", "last_turn_number", "turn_is_open"]

log = get_logger("dsh.loop")


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


class LoopState:
    """One agent's running state. Created with the agent, shared with its driver; lives as long as the agent."""

    __slots__ = (
        "agent",
        "call_ids",
        "cancel_reason",
        "cancel_requested",
        "ctx",
        "current_abort",
        "disposed",
        "done",
        "idle_waiters",
        "inbox",
        "scope",
        "session",
        "status",
        "turn",
        "turn_lock",
    )

    def __init__(self, agent: ReactLoopAgent, ctx: Context, session: Session) -> None:
        self.agent = agent
        """The public face, passed to every listener the loop calls."""
        self.ctx = ctx
        self.session = session
        self.inbox = Inbox()
        self.status: AgentStatus = "idle"
        self.current_abort: CancelToken | None = None
        """The in-flight step's (or compaction's) token; None between steps."""
        self.cancel_requested = False
        """The turn-scoped cancel marker: checked by the driver in its cancellation windows, cleared once per
        loop iteration and after a compaction (``rfcs/0002-loop-and-cancellation.md``)."""
        self.cancel_reason = "cancelled"
        self.disposed = anyio.Event()
        self.done = anyio.Event()
        """Set when the driver's task has exited."""
        self.idle_waiters: list[anyio.Event] = []
        self.scope: Scope | None = None
        """The scope the driver runs in (set by ``start``); background flushes of an injection run there."""
        self.turn_lock = anyio.Lock()
        """Held by every turn and by a compaction: a compaction never interleaves with a turn."""
        self.turn: Turn | None = None
        """The driver's bookkeeping of the current (or last) turn, for closing a stuck one on disposal."""
        self.call_ids = SessionCallIds(session)
        """The tool-call ids the session has used (read from its log on the first tool call)."""

    @property
    def is_disposed(self) -> bool:
        return self.disposed.is_set()

    def check_alive(self) -> None:
        if self.disposed.is_set():
            raise AgentDisposedError(self.agent.id)

    def set_status(self, status: AgentStatus) -> None:
        """Move to *status* (no-op when unchanged or disposed); leaving ``running`` releases idle waiters."""
        if status == self.status or self.status == "disposed":
            return
        self.status = status
        if status != "running":
            self.settle_idle()
        try:
            self.ctx.emit(ev.AGENT_STATUS, self.agent, status)
        except Exception:
            log.exception("agent/status listener failed", agent_id=self.agent.id, status=status)

    def settle_idle(self) -> None:
        """Release every ``when_idle`` waiter registered so far."""
        waiters, self.idle_waiters = self.idle_waiters, []
        for waiter in waiters:
            waiter.set()

    def abort(self, reason: str) -> None:
        if self.current_abort is not None:
            self.current_abort.abort(reason)

    def cancel(self, reason: str) -> None:
        inbox = self.inbox
        if self.status == "running" or self.current_abort is not None or inbox.has_queued or inbox.has_steering:
            self.cancel_requested = True
            self.cancel_reason = reason
        inbox.clear()
        if self.current_abort is not None:
            self.current_abort.abort(reason)

    async def when_idle(self) -> None:
        if self.disposed.is_set():
            await self.done.wait()
            return
        if self.status != "running" and not self.inbox.has_queued:
            return
        waiter = anyio.Event()
        self.idle_waiters.append(waiter)
        await waiter.wait()
        if self.disposed.is_set():
            await self.done.wait()

    def dispose(self) -> None:
        """Begin disposal (idempotent, infallible): wake the loop, release waiters, abort the step."""
        if self.disposed.is_set():
            return
        self.status = "disposed"
        self.disposed.set()
        self.settle_idle()
        if self.current_abort is not None:
            self.current_abort.abort("disposed")
        try:
            self.ctx.emit(ev.AGENT_STATUS, self.agent, "disposed")
        except Exception:
            log.exception("agent/status listener failed", agent_id=self.agent.id, status="disposed")
