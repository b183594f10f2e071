"""Scopes: every registration is a reversible effect owned by the scope that made it.

A scope is the Python spelling of a cordis plugin fiber. Guarantees:

* Effects are disposed in LIFO order, each awaited before the next starts, when the scope is disposed.
  Ordering matters: the agent factory registers "detach session", then "unregister agent", then "stop the
  loop" precisely so that teardown stops the loop first (reference §6.4).
* A failing effect never stops the rest of the teardown: the error is logged and disposal goes on.
* A child scope is itself an effect of its parent, so it is disposed with it (and before any effect the
  parent registered before the child was made).
* Tasks started with :meth:`Scope.spawn` run under their own cancel scope in the application task group;
  disposal cancels them and waits until they have finished.
* The scope that is "calling" is tracked in a :class:`contextvars.ContextVar`: plugin set-up runs with its
  scope current, and spawned tasks inherit theirs. Services use :func:`current_scope` to make a caller's
  registration (a tool, a prompt section, an adapter) disposable with the caller.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import anyio.abc

from dsh._log import get_logger

__all__ = ["Disposer", "Scope", "ScopeDisposedError", "current_scope"]

Disposer = Callable[[], Awaitable[None]]
"""An idempotent, awaitable undo of one registration."""

_current: contextvars.ContextVar[Scope | None] = contextvars.ContextVar("dsh_scope", default=None)
log = get_logger("dsh.kernel")


def current_scope() -> Scope | None:
    """The scope of the plugin (or plugin task) that is running now, if any."""
    return _current.get()


class ScopeDisposedError(RuntimeError):
    """Raised when something is registered on a scope that is already disposed."""


class _Effect:
    __slots__ = ("_done", "_scope", "_undo")

    def __init__(self, scope: Scope, undo: Callable[[], Awaitable[None] | None]) -> None:
        self._scope = scope
        self._undo: Callable[[], Awaitable[None] | None] | None = undo
        self._done = False

    async def __call__(self) -> None:
        """Dispose this effect now (idempotent) and forget it in its scope."""
        undo = self._undo
        if undo is None:
            return
        self._undo = None
        self._scope._forget(self)
        result = undo()
        if result is not None:
            await result


class Scope:
    """An owner of effects, child scopes and tasks, disposed as one unit."""

    def __init__(self, name: str, *, task_group: anyio.abc.TaskGroup | None, parent: Scope | None = None) -> None:
        self.name = name
        self.parent = parent
        self._task_group = task_group
        self._effects: list[_Effect] = []
        self._disposed = False
        self._disposing: anyio.Event | None = None
        self._unlink: Disposer | None = None

    @property
    def disposed(self) -> bool:
        return self._disposed

    def _forget(self, effect: _Effect) -> None:
        try:
            self._effects.remove(effect)
        except ValueError:
            pass

    def effect(self, undo: Callable[[], Awaitable[None] | None]) -> Disposer:
        """Own *undo*; return a disposer that runs it early (idempotent)."""
        if self._disposed:
            raise ScopeDisposedError(f"scope {self.name!r} is disposed")
        effect = _Effect(self, undo)
        self._effects.append(effect)
        return effect

    def child(self, name: str) -> Scope:
        """A scope disposed together with this one."""
        child = Scope(name, task_group=self._task_group, parent=self)
        child._unlink = self.effect(child.dispose)
        return child

    async def close(self) -> None:
        """Dispose this scope and drop it from its parent's effects (use for scopes with a shorter life)."""
        if self._unlink is not None:
            await self._unlink()
        else:
            await self.dispose()

    @contextmanager
    def active(self) -> Iterator[Scope]:
        """Make this scope the calling scope for the duration of the block."""
        token = _current.set(self)
        try:
            yield self
        finally:
            _current.reset(token)

    def spawn(self, fn: Callable[..., Awaitable[Any]], *args: Any, name: str | None = None) -> Disposer:
        """Start ``fn(*args)`` as a task owned by this scope; return a disposer that cancels and awaits it.

        An exception escaping the task is logged, never propagated to the application task group: one
        plugin's background task must not take the process down.
        """
        if self._task_group is None:
            raise RuntimeError("this scope has no task group: enter the App first")
        if self._disposed:
            raise ScopeDisposedError(f"scope {self.name!r} is disposed")
        cancel_scope = anyio.CancelScope()
        finished = anyio.Event()
        task_name = name or getattr(fn, "__qualname__", repr(fn))

        async def runner() -> None:
            token = _current.set(self)
            try:
                with cancel_scope:
                    await fn(*args)
            except BaseException as error:
                from dsh.errors import is_control_flow

                if is_control_flow(error):
                    raise
                log.exception("task failed", task=task_name, scope=self.name)
            finally:
                _current.reset(token)
                finished.set()
                if isinstance(disposer, _Effect):
                    disposer._undo = None
                    self._forget(disposer)

        async def stop() -> None:
            cancel_scope.cancel()
            await finished.wait()

        disposer = self.effect(stop)
        self._task_group.start_soon(runner, name=task_name)
        return disposer

    async def dispose(self) -> None:
        """Dispose every effect in LIFO order, awaiting each. Idempotent; concurrent callers all wait."""
        if self._disposing is not None:
            await self._disposing.wait()
            return
        self._disposing = anyio.Event()
        self._disposed = True
        try:
            while self._effects:
                effect = self._effects[-1]
                try:
                    await effect()
                except Exception:
                    log.exception("effect failed during disposal", scope=self.name)
        finally:
            self._disposing.set()
