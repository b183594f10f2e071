"""Scopes: LIFO effects, child scopes, spawned tasks and the calling scope (``dsh.kernel._scope``)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Awaitable, Callable

import anyio
import anyio.lowlevel
import pytest
from structlog.testing import capture_logs

from dsh.kernel import App, Context, Scope, ScopeDisposedError, current_scope, plugin


def _async_effect(log: list[str], name: str, *, checkpoints: int = 3) -> Callable[[], Awaitable[None]]:
    """An effect that yields to the scheduler between recording its start and its end."""

    async def undo() -> None:
        log.append(f"{name}:start")
        for _ in range(checkpoints):
            await anyio.lowlevel.checkpoint()
        log.append(f"{name}:end")

    return undo


async def test_effects_are_disposed_lifo() -> None:
    scope = Scope("s", task_group=None)
    order: list[str] = []
    for name in ("a", "b", "c"):
        scope.effect(lambda name=name: order.append(name))  # type: ignore[misc]

    await scope.dispose()

    assert order == ["c", "b", "a"]
    assert scope.disposed


async def test_each_async_effect_is_awaited_before_the_next_starts() -> None:
    scope = Scope("s", task_group=None)
    order: list[str] = []
    scope.effect(_async_effect(order, "first"))
    scope.effect(_async_effect(order, "second"))
    scope.effect(_async_effect(order, "third"))

    await scope.dispose()

    assert order == [
        "third:start",
        "third:end",
        "second:start",
        "second:end",
        "first:start",
        "first:end",
    ]


async def test_failing_effect_is_logged_and_does_not_stop_teardown() -> None:
    scope = Scope("failing", task_group=None)
    order: list[str] = []

    async def fails() -> None:
        order.append("fails")
        raise RuntimeError("undo failed")

    scope.effect(lambda: order.append("first"))
    scope.effect(fails)
    scope.effect(lambda: order.append("last"))

    with capture_logs() as logs:
        await scope.dispose()

    assert order == ["last", "fails", "first"]
    failures = [entry for entry in logs if entry["event"] == "effect failed during disposal"]
    assert len(failures) == 1
    assert failures[0]["scope"] == "failing"
    assert failures[0]["log_level"] == "error"


async def test_child_scope_is_disposed_with_parent_before_earlier_parent_effects() -> None:
    parent = Scope("parent", task_group=None)
    order: list[str] = []
    parent.effect(lambda: order.append("parent-before-child"))
    child = parent.child("child")
    child.effect(lambda: order.append("child-1"))
    child.effect(lambda: order.append("child-2"))
    parent.effect(lambda: order.append("parent-after-child"))

    await parent.dispose()

    assert order == ["parent-after-child", "child-2", "child-1", "parent-before-child"]
    assert child.disposed
    assert child.parent is parent


async def test_effect_disposer_runs_early_once_and_is_removed_from_scope() -> None:
    scope = Scope("s", task_group=None)
    calls: list[str] = []
    dispose = scope.effect(lambda: calls.append("undo"))
    scope.effect(lambda: calls.append("other"))

    await dispose()
    await dispose()
    assert calls == ["undo"]

    await scope.dispose()
    assert calls == ["undo", "other"]


async def test_effect_disposer_awaits_an_async_undo() -> None:
    scope = Scope("s", task_group=None)
    order: list[str] = []
    dispose = scope.effect(_async_effect(order, "e"))

    await dispose()

    assert order == ["e:start", "e:end"]


async def test_concurrent_dispose_callers_all_wait_for_teardown() -> None:
    scope = Scope("s", task_group=None)
    release = anyio.Event()
    undo_started = anyio.Event()
    order: list[str] = []

    async def slow_undo() -> None:
        undo_started.set()
        await release.wait()
        order.append("undo-done")

    async def second_disposer() -> None:
        await undo_started.wait()
        await scope.dispose()
        order.append("second-returned")

    scope.effect(slow_undo)
    with anyio.fail_after(1):
        async with anyio.create_task_group() as group:
            group.start_soon(scope.dispose)
            group.start_soon(second_disposer)
            await undo_started.wait()
            for _ in range(5):
                await anyio.lowlevel.checkpoint()
            assert order == []  # the second caller is still waiting
            release.set()

    assert order == ["undo-done", "second-returned"]


async def test_registering_on_a_disposed_scope_raises(app: App) -> None:
    scope = app.ctx.fork("gone").scope
    await scope.dispose()

    with pytest.raises(ScopeDisposedError):
        scope.effect(lambda: None)
    with pytest.raises(ScopeDisposedError):
        scope.child("late")

    async def task() -> None:
        pass

    with pytest.raises(ScopeDisposedError):
        scope.spawn(task)


def test_scope_disposed_error_is_a_runtime_error() -> None:
    assert issubclass(ScopeDisposedError, RuntimeError)


async def test_spawn_without_task_group_raises() -> None:
    async def task() -> None:
        pass

    with pytest.raises(RuntimeError, match="task group"):
        Scope("bare", task_group=None).spawn(task)


async def test_spawned_task_is_cancelled_and_awaited_on_dispose(app: App) -> None:
    scope = app.ctx.fork("tasks").scope
    started = anyio.Event()
    events: list[str] = []

    async def forever() -> None:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            events.append("cleanup-begin")
            with anyio.CancelScope(shield=True):
                await anyio.lowlevel.checkpoint()
            events.append("cleanup-end")

    scope.spawn(forever, name="forever")
    with anyio.fail_after(1):
        await started.wait()
        await scope.dispose()

    assert events == ["cleanup-begin", "cleanup-end"]


async def test_spawn_disposer_cancels_only_that_task(app: App) -> None:
    scope = app.ctx.fork("tasks").scope
    a_started, b_started = anyio.Event(), anyio.Event()
    cancelled: list[str] = []

    async def task(name: str, started: anyio.Event) -> None:
        started.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            cancelled.append(name)
            raise

    stop_a = scope.spawn(task, "a", a_started)
    scope.spawn(task, "b", b_started)
    with anyio.fail_after(1):
        await a_started.wait()
        await b_started.wait()
        await stop_a()
        assert cancelled == ["a"]
        await scope.dispose()
    assert cancelled == ["a", "b"]


async def test_spawned_task_passes_args_and_its_exception_is_logged_not_raised(app: App) -> None:
    scope = app.ctx.fork("tasks").scope
    received: list[int] = []
    finished = anyio.Event()

    async def fails(n: int) -> None:
        received.append(n)
        finished.set()
        raise RuntimeError("task failed")

    with capture_logs() as logs:
        scope.spawn(fails, 42, name="failing-task")
        with anyio.fail_after(1):
            await finished.wait()
            # let the runner finish logging
            for _ in range(5):
                await anyio.lowlevel.checkpoint()

    assert received == [42]
    failures = [entry for entry in logs if entry["event"] == "task failed"]
    assert len(failures) == 1
    assert failures[0]["task"] == "failing-task"
    assert failures[0]["scope"] == "tasks"
    await scope.dispose()  # the finished task left nothing to cancel


async def test_finished_task_disposer_is_a_no_op(app: App) -> None:
    scope = app.ctx.fork("tasks").scope
    done = anyio.Event()
    order: list[str] = []

    async def quick() -> None:
        done.set()

    scope.effect(lambda: order.append("effect"))
    stop = scope.spawn(quick)
    with anyio.fail_after(1):
        await done.wait()
        for _ in range(5):
            await anyio.lowlevel.checkpoint()
        await stop()
        await scope.dispose()
    assert order == ["effect"]


async def test_current_scope_is_inherited_by_spawned_tasks(app: App) -> None:
    scope = app.ctx.fork("tasks").scope
    seen: list[Scope | None] = []
    done = anyio.Event()

    async def task() -> None:
        seen.append(current_scope())
        done.set()

    assert current_scope() is None
    scope.spawn(task)
    with anyio.fail_after(1):
        await done.wait()
    assert seen == [scope]
    assert current_scope() is None


async def test_active_sets_and_restores_current_scope() -> None:
    outer = Scope("outer", task_group=None)
    inner = outer.child("inner")
    assert current_scope() is None
    with outer.active():
        assert current_scope() is outer
        with inner.active():
            assert current_scope() is inner
        assert current_scope() is outer
    assert current_scope() is None


async def test_current_scope_during_plugin_set_up_is_the_plugin_scope(app: App) -> None:
    seen: list[tuple[Scope | None, Scope]] = []
    in_task: list[Scope | None] = []
    done = anyio.Event()

    async def task() -> None:
        in_task.append(current_scope())
        done.set()

    @plugin("probe")
    def probe(ctx: Context, config: object) -> None:
        seen.append((current_scope(), ctx.scope))
        ctx.spawn(task)

    app.ctx.plugin(probe)
    with anyio.fail_after(1):
        await done.wait()

    ((during, plugin_scope),) = seen
    assert during is plugin_scope
    assert plugin_scope.name == "probe"
    assert plugin_scope is not app.ctx.scope
    assert in_task == [plugin_scope]
    assert current_scope() is None


async def test_close_disposes_child_and_drops_it_from_parent() -> None:
    parent = Scope("parent", task_group=None)
    order: list[str] = []
    child = parent.child("child")
    child.effect(lambda: order.append("child"))
    ref = weakref.ref(child)

    await child.close()
    assert order == ["child"]
    assert child.disposed
    assert not parent.disposed

    del child
    gc.collect()
    assert ref() is None, "the parent still holds the closed child"

    parent.effect(lambda: order.append("parent"))
    await parent.dispose()
    assert order == ["child", "parent"]


async def test_close_on_a_root_scope_disposes_it() -> None:
    scope = Scope("root", task_group=None)
    order: list[str] = []
    scope.effect(lambda: order.append("e"))
    await scope.close()
    assert scope.disposed
    assert order == ["e"]


async def test_dispose_is_idempotent() -> None:
    scope = Scope("s", task_group=None)
    calls: list[str] = []
    scope.effect(lambda: calls.append("e"))
    await scope.dispose()
    await scope.dispose()
    assert calls == ["e"]


async def test_registering_on_a_scope_being_disposed_raises() -> None:
    scope = Scope("s", task_group=None)
    errors: list[BaseException] = []

    def registers_late() -> None:
        try:
            scope.effect(lambda: None)
        except ScopeDisposedError as exc:
            errors.append(exc)

    scope.effect(registers_late)
    await scope.dispose()
    assert len(errors) == 1


async def test_fork_context_scope_is_a_child_of_the_context_scope(app: App) -> None:
    forked = app.ctx.fork("fork")
    order: list[str] = []
    forked.effect(lambda: order.append("forked"))
    assert forked.scope.parent is app.ctx.scope
    await app.ctx.scope.dispose()
    assert order == ["forked"]


async def test_abortable_cancels_the_wait_when_the_token_aborts_and_forgets_its_callback() -> None:
    import anyio

    from dsh.kernel import CancelToken, abortable

    token = CancelToken()
    never = anyio.Event()
    reached_end = False
    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:

            async def waiter() -> None:
                nonlocal reached_end
                with abortable(token) as scope:
                    await never.wait()
                    reached_end = True
                assert scope.cancelled_caught

            group.start_soon(waiter)
            await anyio.wait_all_tasks_blocked()
            token.abort("stop")
    assert not reached_end
    assert token._callbacks == []

    already = CancelToken()
    already.abort("earlier")
    with abortable(already) as scope:
        await anyio.sleep(10)
    assert scope.cancelled_caught

    with abortable(None) as scope:
        await anyio.lowlevel.checkpoint()
    assert not scope.cancelled_caught
