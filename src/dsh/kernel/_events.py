"""The event bus: four dispatch modes over one listener table.

Guarantees:

* Listeners run in registration order; ``prepend=True`` listeners run ahead of ordinary ones (the most
  recently prepended first, as in cordis).
* Dispatch iterates an immutable snapshot (a tuple replaced on every registration), so a listener that
  registers or removes listeners during dispatch affects the *next* dispatch only, and the hot path
  (``emit`` per streamed chunk) allocates nothing.
* ``emit`` is synchronous and lets a listener's exception propagate to the emitter: the caller (the loop)
  decides what to contain.
* ``serial`` awaits listeners in order and stops at the first one that *bails* (returns anything but
  ``None`` or ``False``), returning that value.
* ``parallel`` awaits all listeners concurrently; one failure is re-raised as itself, several as an
  :class:`ExceptionGroup`.
* ``waterfall`` is around-middleware: each listener receives the context arguments, the value and
  ``next``; ``await next()`` delegates with the current value, ``await next(v)`` delegates with a rewritten
  one, and returning without calling ``next`` short-circuits. The dispatcher supplies the innermost default.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar, Generic, ParamSpec, Protocol, TypeVar

import anyio

__all__ = [
    "EmitEvent",
    "EventBus",
    "EventSpec",
    "Next",
    "ParallelEvent",
    "SerialEvent",
    "WaterfallEvent",
]

P = ParamSpec("P")
T = TypeVar("T")
R = TypeVar("R")
T_contra = TypeVar("T_contra", contravariant=True)
R_co = TypeVar("R_co", covariant=True)
L = TypeVar("L")

_SAME: Any = object()


class Next(Protocol[T_contra, R_co]):
    """The continuation a waterfall listener receives: call it to delegate to the rest of the chain."""

    def __call__(self, value: T_contra = ..., /) -> Awaitable[R_co]: ...


class EventSpec:
    """A named event with its dispatch mode; the type parameters exist only for the type checker."""

    __slots__ = ("name",)
    mode: str = ""
    _declared: ClassVar[list[EventSpec]] = []

    def __init__(self, name: str) -> None:
        self.name = name
        EventSpec._declared.append(self)

    @staticmethod
    def declared() -> tuple[EventSpec, ...]:
        """Every spec made so far in this process, in creation order (the catalogue's and plugins' own): lets a
        plugin discover events by name pattern, e.g. every ``agent/*`` emit event."""
        return tuple(EventSpec._declared)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class EmitEvent(EventSpec, Generic[P]):
    """Synchronous fan-out; listeners are ``Callable[P, object]``."""

    __slots__ = ()
    mode = "emit"


class SerialEvent(EventSpec, Generic[P]):
    """Awaited in order until one bails; listeners are ``Callable[P, Awaitable[object]]``."""

    __slots__ = ()
    mode = "serial"


class ParallelEvent(EventSpec, Generic[P]):
    """Awaited concurrently; listeners are ``Callable[P, Awaitable[None]]``."""

    __slots__ = ()
    mode = "parallel"


class WaterfallEvent(EventSpec, Generic[L, T, R]):
    """Around-middleware; ``L`` is the listener type, ``T`` the value passed down, ``R`` the result."""

    __slots__ = ()
    mode = "waterfall"


class EventBus:
    """Listener table and dispatchers. One per application; scopes own the registrations."""

    __slots__ = ("_listeners", "_tokens")

    def __init__(self) -> None:
        # Two parallel tuples per event: the callables (what dispatch iterates) and one token per registration
        # (what a remover looks for), so the same callable registered twice is removed exactly once.
        self._listeners: dict[str, tuple[Callable[..., Any], ...]] = {}
        self._tokens: dict[str, tuple[object, ...]] = {}

    def add(self, name: str, listener: Callable[..., Any], *, prepend: bool = False) -> Callable[[], None]:
        """Register *listener*; return an idempotent synchronous remover of this registration."""
        token = object()
        listeners, tokens = self._listeners.get(name, ()), self._tokens.get(name, ())
        if prepend:
            self._listeners[name], self._tokens[name] = (listener, *listeners), (token, *tokens)
        else:
            self._listeners[name], self._tokens[name] = (*listeners, listener), (*tokens, token)

        def remove() -> None:
            tokens = self._tokens.get(name, ())
            for index, candidate in enumerate(tokens):
                if candidate is token:
                    listeners = self._listeners[name]
                    if len(tokens) == 1:
                        del self._listeners[name], self._tokens[name]
                    else:
                        self._listeners[name] = listeners[:index] + listeners[index + 1 :]
                        self._tokens[name] = tokens[:index] + tokens[index + 1 :]
                    return

        return remove

    def listeners(self, name: str) -> tuple[Callable[..., Any], ...]:
        return self._listeners.get(name, ())

    @property
    def table(self) -> Mapping[str, tuple[Callable[..., Any], ...]]:
        """The live listener table (name → listeners in dispatch order), for a dispatcher on a hot path that
        looks its listeners up per call without a method call: entries are replaced, never mutated, so a tuple
        read from it stays what it was while it is iterated."""
        return self._listeners

    def emit(self, name: str, *args: Any) -> None:
        for listener in self._listeners.get(name, ()):
            listener(*args)

    async def serial(self, name: str, *args: Any) -> Any:
        for listener in self._listeners.get(name, ()):
            result = await listener(*args)
            if result is not None and result is not False:
                return result
        return None

    async def parallel(self, name: str, *args: Any) -> None:
        listeners = self._listeners.get(name, ())
        if not listeners:
            return
        if len(listeners) == 1:
            await listeners[0](*args)
            return
        errors: list[Exception] = []

        async def run(listener: Callable[..., Awaitable[object]]) -> None:
            try:
                await listener(*args)
            except Exception as exc:
                errors.append(exc)

        async with anyio.create_task_group() as group:
            for listener in listeners:
                group.start_soon(run, listener)
        if len(errors) == 1:
            raise errors[0]
        if errors:
            raise ExceptionGroup(f"{len(errors)} listeners of {name!r} failed", errors)

    async def waterfall(self, name: str, *args: Any, default: Callable[..., Awaitable[Any]]) -> Any:
        """Run the chain; ``args[-1]`` is the value, the rest are passed to every listener unchanged."""
        listeners = self._listeners.get(name, ())
        context, value = args[:-1], args[-1]
        if not listeners:
            return await default(*context, value)

        async def call(index: int, current: Any) -> Any:
            if index == len(listeners):
                return await default(*context, current)

            def next_(rewritten: Any = _SAME, /) -> Awaitable[Any]:
                return call(index + 1, current if rewritten is _SAME else rewritten)

            return await listeners[index](*context, current, next_)

        return await call(0, value)
