"""The inbox: two FIFOs and one wake-up slot (reference §5; the original's inbox.spec)."""

from __future__ import annotations

import anyio
import pytest

from dsh.loop._inbox import Inbox, InboxMessage
from dsh.services.llm import MessageSource

USER: MessageSource = {"kind": "user"}


def message(text: str, source: MessageSource = USER) -> InboxMessage:
    return InboxMessage([{"type": "text", "text": text}], source)


def texts(messages: list[InboxMessage]) -> list[str]:
    out: list[str] = []
    for m in messages:
        block = m.content[0]
        assert block["type"] == "text"
        out.append(block["text"])
    return out


async def returns_without_suspending(inbox: Inbox, cancel: anyio.Event | None = None) -> bool:
    """True when ``wait_for_queued`` returns without ever yielding (a cancelled scope would stop a yield)."""
    reached = False
    with anyio.CancelScope() as scope:
        scope.cancel()
        await inbox.wait_for_queued(cancel)
        reached = True
    return reached


def test_queued_is_fifo() -> None:
    inbox = Inbox()
    for text in ("one", "two", "three"):
        inbox.enqueue(message(text))
    assert texts(inbox.drain_queued()) == ["one", "two", "three"]


def test_steering_is_fifo() -> None:
    inbox = Inbox()
    for text in ("one", "two", "three"):
        inbox.steer(message(text))
    assert texts(inbox.drain_steering()) == ["one", "two", "three"]


def test_queues_are_separate() -> None:
    inbox = Inbox()
    inbox.enqueue(message("q1"))
    inbox.steer(message("s1"))
    inbox.enqueue(message("q2"))
    inbox.steer(message("s2"))
    assert inbox.has_queued and inbox.has_steering
    assert texts(inbox.drain_steering()) == ["s1", "s2"]
    assert inbox.has_queued and not inbox.has_steering
    assert texts(inbox.drain_queued()) == ["q1", "q2"]
    assert not inbox.has_queued


def test_messages_keep_their_source() -> None:
    inbox = Inbox()
    plugin_source: MessageSource = {"kind": "plugin", "plugin": "goal"}
    inbox.enqueue(message("a", plugin_source))
    [drained] = inbox.drain_queued()
    assert drained.source == plugin_source


def test_drain_returns_everything_and_empties() -> None:
    inbox = Inbox()
    inbox.enqueue(message("a"))
    inbox.enqueue(message("b"))
    inbox.steer(message("c"))
    assert texts(inbox.drain_queued()) == ["a", "b"]
    assert inbox.drain_queued() == []
    assert not inbox.has_queued
    assert texts(inbox.drain_steering()) == ["c"]
    assert inbox.drain_steering() == []
    assert not inbox.has_steering


def test_clear_empties_both() -> None:
    inbox = Inbox()
    inbox.enqueue(message("a"))
    inbox.steer(message("b"))
    inbox.clear()
    assert not inbox.has_queued
    assert not inbox.has_steering
    assert inbox.drain_queued() == []
    assert inbox.drain_steering() == []


def test_steer_does_not_count_as_queued() -> None:
    inbox = Inbox()
    inbox.steer(message("s"))
    assert not inbox.has_queued


async def test_wait_resolves_immediately_when_something_is_queued() -> None:
    inbox = Inbox()
    inbox.enqueue(message("a"))
    assert await returns_without_suspending(inbox)
    assert await returns_without_suspending(inbox, anyio.Event())
    assert texts(inbox.drain_queued()) == ["a"]  # waiting consumes nothing


async def test_wait_resolves_immediately_when_cancel_is_already_set() -> None:
    inbox = Inbox()
    cancel = anyio.Event()
    cancel.set()
    assert await returns_without_suspending(inbox, cancel)


async def test_wait_suspends_when_nothing_is_queued() -> None:
    inbox = Inbox()
    inbox.steer(message("steering does not wake"))
    assert not await returns_without_suspending(inbox, anyio.Event())


@pytest.mark.parametrize("with_cancel", [False, True])
async def test_wait_resolves_on_enqueue(with_cancel: bool) -> None:
    inbox = Inbox()
    done = anyio.Event()

    async def waiter() -> None:
        await inbox.wait_for_queued(anyio.Event() if with_cancel else None)
        done.set()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(waiter)
            await anyio.wait_all_tasks_blocked()
            assert not done.is_set()
            inbox.steer(message("no wake"))
            await anyio.wait_all_tasks_blocked()
            assert not done.is_set()
            inbox.enqueue(message("wake"))
            await done.wait()
    assert texts(inbox.drain_queued()) == ["wake"]


async def test_wait_resolves_on_the_cancel_event() -> None:
    inbox = Inbox()
    cancel = anyio.Event()
    done = anyio.Event()

    async def waiter() -> None:
        await inbox.wait_for_queued(cancel)
        done.set()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(waiter)
            await anyio.wait_all_tasks_blocked()
            assert not done.is_set()
            cancel.set()
            await done.wait()
    assert not inbox.has_queued


async def test_only_the_latest_waiter_is_woken() -> None:
    inbox = Inbox()
    first_done, second_done = anyio.Event(), anyio.Event()

    async def waiter(done: anyio.Event) -> None:
        await inbox.wait_for_queued(anyio.Event())
        done.set()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(waiter, first_done)
            await anyio.wait_all_tasks_blocked()
            group.start_soon(waiter, second_done)
            await anyio.wait_all_tasks_blocked()
            inbox.enqueue(message("wake"))
            await second_done.wait()
            await anyio.wait_all_tasks_blocked()
            assert not first_done.is_set()
            group.cancel_scope.cancel()


async def test_a_stale_waiter_cleanup_does_not_clear_a_newer_waiter() -> None:
    inbox = Inbox()
    stale_cancel = anyio.Event()
    stale_done, fresh_done = anyio.Event(), anyio.Event()

    async def waiter(cancel: anyio.Event, done: anyio.Event) -> None:
        await inbox.wait_for_queued(cancel)
        done.set()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(waiter, stale_cancel, stale_done)
            await anyio.wait_all_tasks_blocked()
            group.start_soon(waiter, anyio.Event(), fresh_done)
            await anyio.wait_all_tasks_blocked()
            stale_cancel.set()  # the stale waiter leaves; its clean-up must keep the newer slot
            await stale_done.wait()
            await anyio.wait_all_tasks_blocked()
            assert not fresh_done.is_set()
            inbox.enqueue(message("wake"))
            await anyio.wait_all_tasks_blocked()
            assert fresh_done.is_set(), "the newer waiter was not woken: a stale clean-up cleared its slot"
            group.cancel_scope.cancel()


async def test_a_cancelled_waiter_task_leaves_no_slot_behind() -> None:
    inbox = Inbox()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(inbox.wait_for_queued, anyio.Event())
            await anyio.wait_all_tasks_blocked()
            group.cancel_scope.cancel()
    inbox.enqueue(message("a"))  # no waiter: must not fail
    assert await returns_without_suspending(inbox)
