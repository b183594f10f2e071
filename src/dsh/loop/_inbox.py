"""The inbox: an agent's two in-memory FIFOs, ``queued`` (prompts) and ``steering`` (mid-turn guidance).

Guarantees:

* FIFO order in each list; the lists are independent.
* :meth:`Inbox.enqueue` wakes the *latest* waiter only; :meth:`Inbox.steer` wakes nobody (steering is drained
  by a running turn, or re-queued by the driver when the turn ends).
* :meth:`Inbox.wait_for_queued` returns at once when something is queued, otherwise on the next enqueue or when
  the given ``cancel`` event is set (disposal). A waiter's clean-up never clears a newer waiter's slot.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import anyio

from dsh.services.llm import ContentBlock, MessageSource

__all__ = ["Inbox", "InboxMessage"]


@dataclass(frozen=True, slots=True)
class InboxMessage:
    content: list[ContentBlock]
    source: MessageSource


class Inbox:
    __slots__ = ("_queued", "_steering", "_wakeup")

    def __init__(self) -> None:
        self._queued: deque[InboxMessage] = deque()
        self._steering: deque[InboxMessage] = deque()
        self._wakeup: anyio.Event | None = None

    @property
    def has_queued(self) -> bool:
        return bool(self._queued)

    @property
    def has_steering(self) -> bool:
        return bool(self._steering)

    def enqueue(self, message: InboxMessage) -> None:
        self._queued.append(message)
        wakeup = self._wakeup
        if wakeup is not None:
            wakeup.set()

    def steer(self, message: InboxMessage) -> None:
        self._steering.append(message)

    def drain_queued(self) -> list[InboxMessage]:
        drained = list(self._queued)
        self._queued.clear()
        return drained

    def drain_steering(self) -> list[InboxMessage]:
        drained = list(self._steering)
        self._steering.clear()
        return drained

    def clear(self) -> None:
        self._queued.clear()
        self._steering.clear()

    async def wait_for_queued(self, cancel: anyio.Event | None = None) -> None:
        if self._queued or (cancel is not None and cancel.is_set()):
            return
        wakeup = anyio.Event()
        self._wakeup = wakeup
        try:
            if cancel is None:
                await wakeup.wait()
                return
            async with anyio.create_task_group() as group:

                async def relay(event: anyio.Event) -> None:
                    await event.wait()
                    group.cancel_scope.cancel()

                group.start_soon(relay, wakeup)
                group.start_soon(relay, cancel)
        finally:
            if self._wakeup is wakeup:
                self._wakeup = None
