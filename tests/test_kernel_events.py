"""The event bus: emit, serial, parallel and waterfall dispatch (``dsh.kernel._events``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh.kernel import App, EmitEvent, EventBus, ParallelEvent, SerialEvent, WaterfallEvent

Next = Callable[..., Awaitable[Any]]


# -- emit ---------------------------------------------------------------------------------------------------


def test_emit_runs_listeners_synchronously_in_registration_order() -> None:
    bus = EventBus()
    calls: list[tuple[str, tuple[Any, ...]]] = []
    bus.add("e", lambda *args: calls.append(("a", args)))
    bus.add("e", lambda *args: calls.append(("b", args)))
    bus.add("e", lambda *args: calls.append(("c", args)))

    bus.emit("e", 1, "two")

    # No await happened: the listeners already ran when emit returned.
    assert calls == [("a", (1, "two")), ("b", (1, "two")), ("c", (1, "two"))]


def test_emit_without_listeners_is_a_no_op() -> None:
    EventBus().emit("nobody-listens", 1)


def test_emit_listener_exception_propagates_to_emitter_and_stops_dispatch() -> None:
    bus = EventBus()
    calls: list[str] = []

    def fail() -> None:
        raise KeyError("listener failed")

    bus.add("e", lambda: calls.append("before"))
    bus.add("e", fail)
    bus.add("e", lambda: calls.append("after"))

    with pytest.raises(KeyError, match="listener failed"):
        bus.emit("e")
    assert calls == ["before"]


def test_prepend_runs_ahead_of_ordinary_listeners_most_recent_first() -> None:
    bus = EventBus()
    calls: list[str] = []
    bus.add("e", lambda: calls.append("ordinary-1"))
    bus.add("e", lambda: calls.append("prepended-1"), prepend=True)
    bus.add("e", lambda: calls.append("ordinary-2"))
    bus.add("e", lambda: calls.append("prepended-2"), prepend=True)

    bus.emit("e")

    assert calls == ["prepended-2", "prepended-1", "ordinary-1", "ordinary-2"]


def test_listener_added_during_dispatch_runs_only_on_next_dispatch() -> None:
    bus = EventBus()
    calls: list[str] = []
    added: list[bool] = []

    def adder() -> None:
        calls.append("adder")
        if not added:
            added.append(True)
            bus.add("e", lambda: calls.append("late"))

    bus.add("e", adder)
    bus.emit("e")
    assert calls == ["adder"]

    calls.clear()
    bus.emit("e")
    assert calls == ["adder", "late"]


def test_listener_removed_during_dispatch_still_runs_in_that_dispatch_only() -> None:
    bus = EventBus()
    calls: list[str] = []
    removers: dict[str, Callable[[], None]] = {}

    def first() -> None:
        calls.append("first")
        removers["second"]()

    removers["first"] = bus.add("e", first)
    removers["second"] = bus.add("e", lambda: calls.append("second"))

    bus.emit("e")
    assert calls == ["first", "second"]  # the snapshot taken at dispatch still had "second"

    calls.clear()
    bus.emit("e")
    assert calls == ["first"]


def test_remover_removes_its_registration_only() -> None:
    bus = EventBus()
    calls: list[str] = []
    remove_a = bus.add("e", lambda: calls.append("a"))
    bus.add("e", lambda: calls.append("b"))

    remove_a()
    remove_a()
    bus.emit("e")

    assert calls == ["b"]
    assert len(bus.listeners("e")) == 1


def test_remover_is_idempotent_when_the_same_callable_is_registered_twice() -> None:
    bus = EventBus()
    calls: list[str] = []

    def listener() -> None:
        calls.append("x")

    remove_first = bus.add("e", listener)
    bus.add("e", listener)  # the same callable registered twice

    remove_first()
    remove_first()  # idempotent: must not remove the other registration
    bus.emit("e")

    assert calls == ["x"]


def test_remover_of_a_repeated_callable_keeps_the_order_of_the_other_registrations() -> None:
    bus = EventBus()
    calls: list[str] = []

    def f() -> None:
        calls.append("f")

    bus.add("e", f)
    bus.add("e", lambda: calls.append("g"))
    remove_second_f = bus.add("e", f)

    remove_second_f()
    bus.emit("e")

    assert calls == ["f", "g"]


async def test_context_on_and_emit_use_the_bus_and_the_scope(app: App) -> None:
    event: EmitEvent[[int]] = EmitEvent("test/emit")
    seen: list[int] = []
    ctx = app.ctx.fork("listener")
    ctx.on(event, seen.append)

    app.ctx.emit(event, 7)
    await ctx.scope.dispose()
    app.ctx.emit(event, 8)

    assert seen == [7]


async def test_context_on_prepend(app: App) -> None:
    event: EmitEvent[[]] = EmitEvent("test/prepend")
    calls: list[str] = []
    app.ctx.on(event, lambda: calls.append("ordinary"))
    app.ctx.on(event, lambda: calls.append("prepended"), prepend=True)

    app.ctx.emit(event)

    assert calls == ["prepended", "ordinary"]


# -- serial -------------------------------------------------------------------------------------------------


async def test_serial_awaits_listeners_in_order() -> None:
    bus = EventBus()
    calls: list[str] = []

    async def slow() -> None:
        calls.append("slow-start")
        await anyio.lowlevel.checkpoint()
        await anyio.lowlevel.checkpoint()
        calls.append("slow-end")

    async def fast() -> None:
        calls.append("fast")

    bus.add("s", slow)
    bus.add("s", fast)

    assert await bus.serial("s") is None
    assert calls == ["slow-start", "slow-end", "fast"]


async def test_serial_returns_first_bail_value_and_skips_later_listeners() -> None:
    bus = EventBus()
    calls: list[str] = []

    async def none_(x: int) -> None:
        calls.append(f"none:{x}")

    async def false_(x: int) -> bool:
        calls.append(f"false:{x}")
        return False

    async def bail(x: int) -> str:
        calls.append(f"bail:{x}")
        return f"result-{x}"

    async def later(x: int) -> str:
        calls.append("later")
        return "too late"

    for listener in (none_, false_, bail, later):
        bus.add("s", listener)

    assert await bus.serial("s", 3) == "result-3"
    assert calls == ["none:3", "false:3", "bail:3"]


@pytest.mark.parametrize("value", [0, "", [], True])
async def test_serial_bails_on_any_value_but_none_and_false(value: object) -> None:
    bus = EventBus()
    reached: list[bool] = []

    async def bail() -> object:
        return value

    async def later() -> str:
        reached.append(True)
        return "later"

    bus.add("s", bail)
    bus.add("s", later)

    assert await bus.serial("s") == value
    assert reached == []


async def test_serial_without_bail_returns_none() -> None:
    bus = EventBus()

    async def falsy() -> bool:
        return False

    bus.add("s", falsy)
    assert await bus.serial("s") is None
    assert await bus.serial("nobody") is None


async def test_context_serial(app: App) -> None:
    event: SerialEvent[[str]] = SerialEvent("test/serial")

    async def bail(name: str) -> str:
        return name.upper()

    app.ctx.on(event, bail)
    assert await app.ctx.serial(event, "abc") == "ABC"


# -- parallel -----------------------------------------------------------------------------------------------


async def test_parallel_runs_listeners_concurrently() -> None:
    bus = EventBus()
    a_started, b_started = anyio.Event(), anyio.Event()
    finished: list[str] = []

    async def a() -> None:
        a_started.set()
        await b_started.wait()  # deadlocks unless b runs while a is suspended
        finished.append("a")

    async def b() -> None:
        b_started.set()
        await a_started.wait()
        finished.append("b")

    bus.add("p", a)
    bus.add("p", b)

    with anyio.fail_after(1):
        await bus.parallel("p")
    assert sorted(finished) == ["a", "b"]


async def test_parallel_waits_for_every_listener() -> None:
    bus = EventBus()
    release = anyio.Event()
    done: list[str] = []

    async def waits() -> None:
        await release.wait()
        done.append("waits")

    async def releases() -> None:
        release.set()

    bus.add("p", waits)
    bus.add("p", releases)
    with anyio.fail_after(1):
        await bus.parallel("p")
    assert done == ["waits"]


async def test_parallel_single_failure_is_reraised_as_itself() -> None:
    bus = EventBus()
    other_finished: list[bool] = []

    async def fails() -> None:
        raise LookupError("one failed")

    async def succeeds() -> None:
        await anyio.lowlevel.checkpoint()
        other_finished.append(True)

    bus.add("p", fails)
    bus.add("p", succeeds)

    with pytest.raises(LookupError, match="one failed"):
        await bus.parallel("p")
    assert other_finished == [True]


async def test_parallel_single_listener_failure_is_reraised_as_itself() -> None:
    bus = EventBus()

    async def fails() -> None:
        raise LookupError("only one")

    bus.add("p", fails)
    with pytest.raises(LookupError, match="only one"):
        await bus.parallel("p")


async def test_parallel_several_failures_raise_exception_group() -> None:
    bus = EventBus()

    async def fails_a() -> None:
        raise KeyError("a")

    async def fails_b() -> None:
        raise ValueError("b")

    async def ok() -> None:
        pass

    bus.add("p", fails_a)
    bus.add("p", ok)
    bus.add("p", fails_b)

    with pytest.raises(ExceptionGroup) as caught:
        await bus.parallel("p")
    assert sorted(type(e).__name__ for e in caught.value.exceptions) == ["KeyError", "ValueError"]


async def test_parallel_passes_arguments(app: App) -> None:
    event: ParallelEvent[[int, str]] = ParallelEvent("test/parallel")
    seen: list[tuple[int, str]] = []

    async def listener(n: int, s: str) -> None:
        seen.append((n, s))

    app.ctx.on(event, listener)
    app.ctx.on(event, listener)
    await app.ctx.parallel(event, 1, "x")
    assert seen == [(1, "x"), (1, "x")]


# -- waterfall ----------------------------------------------------------------------------------------------


async def test_waterfall_without_listeners_calls_default_with_context_and_value() -> None:
    bus = EventBus()

    async def default(a: str, b: str, value: int) -> str:
        return f"{a}{b}{value}"

    assert await bus.waterfall("w", "x", "y", 5, default=default) == "xy5"


async def test_waterfall_listener_receives_context_value_and_next() -> None:
    bus = EventBus()
    received: list[tuple[Any, ...]] = []

    async def listener(a: str, b: int, value: int, next_: Next) -> Any:
        received.append((a, b, value))
        return await next_()

    async def default(a: str, b: int, value: int) -> tuple[str, int, int]:
        return (a, b, value)

    bus.add("w", listener)
    assert await bus.waterfall("w", "ctx", 2, 10, default=default) == ("ctx", 2, 10)
    assert received == [("ctx", 2, 10)]


async def test_waterfall_next_without_argument_delegates_unchanged_value() -> None:
    bus = EventBus()
    value = {"k": 1}
    seen: list[object] = []

    async def passthrough(v: object, next_: Next) -> Any:
        return await next_()

    async def default(v: object) -> object:
        seen.append(v)
        return "done"

    bus.add("w", passthrough)
    bus.add("w", passthrough)
    assert await bus.waterfall("w", value, default=default) == "done"
    assert seen[0] is value


async def test_waterfall_next_with_value_rewrites_for_inner_listeners_and_default() -> None:
    bus = EventBus()
    seen_by_inner: list[int] = []

    async def outer(v: int, next_: Next) -> Any:
        return await next_(v * 2)

    async def inner(v: int, next_: Next) -> Any:
        seen_by_inner.append(v)
        return await next_(v + 1)

    async def default(v: int) -> int:
        return v

    bus.add("w", outer)
    bus.add("w", inner)
    assert await bus.waterfall("w", 5, default=default) == 11
    assert seen_by_inner == [10]


async def test_waterfall_next_accepts_none_as_a_rewrite() -> None:
    bus = EventBus()

    async def to_none(v: object, next_: Next) -> Any:
        return await next_(None)

    async def default(v: object) -> object:
        return ("default saw", v)

    bus.add("w", to_none)
    assert await bus.waterfall("w", "original", default=default) == ("default saw", None)


async def test_waterfall_short_circuit_skips_inner_listeners_and_default() -> None:
    bus = EventBus()
    called: list[str] = []

    async def veto(v: int, next_: Next) -> str:
        called.append("veto")
        return "vetoed"

    async def inner(v: int, next_: Next) -> Any:
        called.append("inner")
        return await next_()

    async def default(v: int) -> str:
        called.append("default")
        return "default"

    bus.add("w", veto)
    bus.add("w", inner)
    assert await bus.waterfall("w", 1, default=default) == "vetoed"
    assert called == ["veto"]


async def test_waterfall_is_around_middleware_with_default_innermost() -> None:
    bus = EventBus()
    trace: list[str] = []

    async def outer(v: str, next_: Next) -> str:
        trace.append("outer-before")
        result = await next_(v + "o")
        trace.append("outer-after")
        return f"[{result}]"

    async def inner(v: str, next_: Next) -> str:
        trace.append("inner-before")
        result = await next_(v + "i")
        trace.append("inner-after")
        return f"({result})"

    async def default(v: str) -> str:
        trace.append("default")
        return v.upper()

    bus.add("w", outer)
    bus.add("w", inner)
    assert await bus.waterfall("w", "v", default=default) == "[(VOI)]"
    assert trace == ["outer-before", "inner-before", "default", "inner-after", "outer-after"]


async def test_waterfall_prepended_listener_is_outermost() -> None:
    bus = EventBus()

    async def add_a(v: str, next_: Next) -> Any:
        return await next_(v + "a")

    async def add_b(v: str, next_: Next) -> Any:
        return await next_(v + "b")

    async def default(v: str) -> str:
        return v

    bus.add("w", add_a)
    bus.add("w", add_b, prepend=True)
    assert await bus.waterfall("w", "", default=default) == "ba"


async def test_waterfall_listener_exception_propagates() -> None:
    bus = EventBus()

    async def fails(v: int, next_: Next) -> Any:
        raise RuntimeError("middleware failed")

    async def default(v: int) -> int:
        return v

    bus.add("w", fails)
    with pytest.raises(RuntimeError, match="middleware failed"):
        await bus.waterfall("w", 1, default=default)


async def test_context_waterfall(app: App) -> None:
    event: WaterfallEvent[Any, int, int] = WaterfallEvent("test/waterfall")

    async def double(v: int, next_: Next) -> Any:
        return await next_(v * 2)

    async def default(v: int) -> int:
        return v + 1

    app.ctx.on(event, double)
    assert await app.ctx.waterfall(event, 4, default=default) == 9


_step = st.one_of(
    st.tuples(st.just("add"), st.integers(-100, 100)),
    st.tuples(st.just("const"), st.integers(-100, 100)),
    st.tuples(st.just("post"), st.integers(-3, 3)),
)


def _model(steps: list[tuple[str, int]], value: int) -> int:
    """Reference semantics: add rewrites, const short-circuits, post multiplies the inner result."""
    if not steps:
        return value * 1000 + 7  # the default
    (kind, k), rest = steps[0], steps[1:]
    if kind == "add":
        return _model(rest, value + k)
    if kind == "const":
        return k
    return _model(rest, value) * k


def _listener(kind: str, k: int) -> Callable[[int, Next], Awaitable[int]]:
    async def add(v: int, next_: Next) -> int:
        result: int = await next_(v + k)
        return result

    async def const(v: int, next_: Next) -> int:
        return k

    async def post(v: int, next_: Next) -> int:
        result: int = await next_()
        return result * k

    return {"add": add, "const": const, "post": post}[kind]


@given(steps=st.lists(_step, max_size=8), start=st.integers(-1000, 1000))
async def test_waterfall_matches_reference_model(steps: list[tuple[str, int]], start: int) -> None:
    bus = EventBus()
    for kind, k in steps:
        bus.add("w", _listener(kind, k))

    async def default(v: int) -> int:
        return v * 1000 + 7

    assert await bus.waterfall("w", start, default=default) == _model(steps, start)
