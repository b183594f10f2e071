"""A cancel token: the Python spelling of the web's ``AbortController``/``AbortSignal`` pair.

The loop checks a token at exact checkpoints (before each appended chunk, around each tool call) because the
tests assert *which* events were appended when cancellation lands; anyio cancellation alone cannot say that.

Guarantees: :meth:`CancelToken.abort` is idempotent (the first reason wins), synchronous, and runs the
registered callbacks in registration order before returning; :meth:`CancelToken.wait` returns once aborted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import anyio

__all__ = ["AbortedError", "CancelToken", "abortable"]


class AbortedError(Exception):
    """Raised by :meth:`CancelToken.raise_if_aborted`; ``reason`` is the abort reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class CancelToken:
    __slots__ = ("_callbacks", "_event", "_reason", "aborted")

    def __init__(self) -> None:
        self.aborted = False
        """Whether :meth:`abort` was called (an attribute, not a property: the loop reads it per chunk)."""
        self._reason: str | None = None
        self._callbacks: list[Callable[[str], object]] = []
        self._event: anyio.Event | None = None

    @property
    def reason(self) -> str | None:
        return self._reason

    def abort(self, reason: str = "aborted") -> None:
        if self._reason is not None:
            return
        self._reason = reason
        self.aborted = True
        if self._event is not None:
            self._event.set()
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(reason)

    def raise_if_aborted(self) -> None:
        if self._reason is not None:
            raise AbortedError(self._reason)

    def add_callback(self, callback: Callable[[str], object]) -> Callable[[], None]:
        """Call *callback(reason)* on abort (at once if already aborted); return a remover."""
        if self._reason is not None:
            callback(self._reason)
            return lambda: None
        self._callbacks.append(callback)

        def remove() -> None:
            try:
                self._callbacks.remove(callback)
            except ValueError:
                pass

        return remove

    async def wait(self) -> str:
        """Return the reason once the token is aborted."""
        if self._reason is None:
            if self._event is None:
                self._event = anyio.Event()
            await self._event.wait()
        assert self._reason is not None
        return self._reason


@contextmanager
def abortable(token: CancelToken | None) -> Iterator[anyio.CancelScope]:
    """A cancel scope that *token*'s abort cancels (at once if it is already aborted); None: a plain scope.

    The way to wait on something outside (a client's answer, a process) for no longer than the turn that asked:
    ``with abortable(execution.signal): answer = await request()``, then check ``token.aborted``. The token's
    callback is removed on exit, so a long-lived token does not collect dead scopes."""
    with anyio.CancelScope() as scope:
        remove = token.add_callback(lambda _reason: scope.cancel()) if token is not None else None
        try:
            yield scope
        finally:
            if remove is not None:
                remove()
