"""``ReactLoopAgent``: the concrete agent, the public face of one agent's loop. Its state (the inbox, the status,
the per-step cancel token, the turn-scoped cancel marker, the idle waiters) and the transitions on it live in
:class:`~dsh.loop._state.LoopState`; the driver (:mod:`dsh.loop._driver`) runs turns on that same state. This
class only translates the :class:`~dsh.services.agents.Agent` interface into calls on them.

Guarantees (reference §3.1, §4.4, §4.5, §5; the state's own in :mod:`dsh.loop._state`):

* ``send`` only enqueues and returns: the status flips to ``running`` later, in the driver, so prompts sent in
  one synchronous burst are batched into one turn.
* ``steer`` while idle behaves exactly like ``send``; while running it goes to the steering FIFO.
* After disposal ``send``, ``steer``, ``inject`` and ``compact`` raise :class:`~dsh.loop._state.AgentDisposedError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from dsh import events as ev
from dsh._log import get_logger
from dsh.loop._driver import close_stuck_turn, compact, inject, run_loop
from dsh.loop._inbox import Inbox, InboxMessage
from dsh.loop._state import LoopState
from dsh.services.agents import AgentOptions, AgentStatus
from dsh.services.llm import ContentBlock, MessageSource

if TYPE_CHECKING:
    from dsh.kernel import Context, Scope
    from dsh.services.sessions import Session

__all__ = ["ReactLoopAgent"]

log = get_logger("dsh.loop")
STOP_GRACE = 1.0
"""Seconds a disposed agent's loop gets to end its turn before its task is cancelled."""


def _user() -> MessageSource:
    """A fresh default source per message: listeners receive it and must not be able to alter the next one."""
    return {"kind": "user"}


class ReactLoopAgent:
    def __init__(self, ctx: Context, id: str, session: Session, options: AgentOptions | None = None) -> None:
        self._id = id
        self._session = session
        self._options = options or AgentOptions()
        self._state = LoopState(self, ctx, session)
        self.inbox: Inbox = self._state.inbox

    # -- the Agent interface ----------------------------------------------------------------------------

    @property
    def id(self) -> str:
        return self._id

    @property
    def session(self) -> Session:
        return self._session

    @property
    def status(self) -> AgentStatus:
        return self._state.status

    @property
    def options(self) -> AgentOptions:
        return self._options

    @property
    def is_disposed(self) -> bool:
        return self._state.disposed.is_set()

    def send(self, content: list[ContentBlock], source: MessageSource | None = None) -> None:
        """Queue a prompt; it runs in the next turn (batched with everything queued before the turn starts)."""
        self._state.check_alive()
        resolved = source if source is not None else _user()
        self.inbox.enqueue(InboxMessage(content, resolved))
        self._emit_queued(content, resolved, steering=False)

    def steer(self, content: list[ContentBlock], source: MessageSource | None = None) -> None:
        """Guide the running turn at its next step boundary; while idle this is :meth:`send`."""
        self._state.check_alive()
        if self._state.status != "running":
            self.send(content, source)
            return
        resolved = source if source is not None else _user()
        self.inbox.steer(InboxMessage(content, resolved))
        self._emit_queued(content, resolved, steering=True)

    def inject(self, content: list[ContentBlock], source: MessageSource | None = None) -> None:
        """Add context without a model call: into the open turn, or as a one-shot turn of its own."""
        self._state.check_alive()
        inject(self._state, content, source if source is not None else _user())

    def abort(self, reason: str = "aborted") -> None:
        """Abort the in-flight step only; queued prompts stay queued."""
        self._state.abort(reason)

    def cancel(self, reason: str = "cancelled") -> None:
        """Cancel the current or about-to-start turn and drop everything queued or steering."""
        self._state.cancel(reason)

    async def when_idle(self) -> None:
        """Return once the agent is quiescent: idle with nothing queued, or disposed and its loop exited."""
        await self._state.when_idle()

    async def compact(self, instructions: str | None = None) -> dict[str, Any] | None:
        """Compact the conversation between turns (see :class:`~dsh.services.agents.Agent`)."""
        self._state.check_alive()
        return await compact(self._state, instructions)

    # -- lifecycle --------------------------------------------------------------------------------------

    def start(self, scope: Scope) -> None:
        """Run the driver in *scope*; disposing the scope stops the loop gracefully, then awaits its exit."""
        self._state.scope = scope
        scope.spawn(run_loop, self._state, name=f"agent-loop:{self._id}")
        scope.effect(self._stop)

    async def _stop(self) -> None:
        """Graceful stop, bounded: the turn is aborted and normally ends (and is flushed) at once. A loop still
        running after :data:`STOP_GRACE` seconds (a tool that ignores its cancel token) has its turn closed here
        as ``disposed`` (a synthetic error ``tool/result`` for the stuck call, ``step/end``, ``turn/end``;
        flushed, bounded by the same grace) and is then left to the next effect, which cancels its task; the
        loop appends nothing to a turn closed this way. Disposal can therefore never wedge on a misbehaving
        plugin, and the log stays balanced (a later load does not call the turn ``interrupted``)."""
        state = self._state
        state.dispose()
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(STOP_GRACE):
                await state.done.wait()
            if state.done.is_set():
                return
            log.warning("agent loop did not stop in time; cancelling it", agent_id=self._id, grace=STOP_GRACE)
            if close_stuck_turn(state):
                with anyio.move_on_after(STOP_GRACE):
                    try:
                        await state.ctx.sessions.flush(self._session)
                    except Exception as error:
                        log.warning("session/flush failed after a stuck turn", agent_id=self._id, error=str(error))

    def dispose_now(self) -> None:
        """Begin disposal (idempotent, infallible): wake the loop, release waiters, abort the step."""
        self._state.dispose()

    async def wait_done(self) -> None:
        await self._state.done.wait()

    # -- private ----------------------------------------------------------------------------------------

    def _emit_queued(self, content: list[ContentBlock], source: MessageSource, *, steering: bool) -> None:
        try:
            self._state.ctx.emit(ev.AGENT_QUEUED, self, content, {"source": source, "steering": steering})
        except Exception:
            log.exception("agent/queued listener failed", agent_id=self._id)
