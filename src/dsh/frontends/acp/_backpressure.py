"""Back-pressure from the protocol pipe to the model stream: a client that stops reading stops the model.

Every streamed chunk becomes a ``session/update`` frame, sent synchronously from the session's event path (which
cannot wait). The place that *can* wait is where the loop pulls the next chunk from the model: this module wraps
each model stream (the ``llm/stream`` waterfall) so that, before a chunk is pulled, a congested writer is
awaited. The loop and the providers know nothing of it.

Guarantees:

* While the writer holds fewer frames than its limit, a chunk costs one synchronous check, nothing more.
* While it holds more, the model stream is not pulled: the model's bytes wait in the socket (or the provider's
  generator), not in dsh's memory. At most the limit plus the frames of one chunk are held for the stream.
* The wait is cancellable: ``session/cancel``, a closed session or shutdown end it like any other wait of the
  turn (cancel still works while the client does not read; its answer is queued behind what is held).
* ``aclose`` reaches the wrapped stream (the loop closes every stream it opened).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from dsh.events import LlmStreamListener
    from dsh.kernel import Next
    from dsh.services.llm import GenerateRequest, StreamChunk

__all__ = ["FlowControl", "stream_gate"]


class FlowControl(Protocol):
    """What the writer offers producers that can wait (:class:`~dsh.frontends.acp._stdio.FrameWriter`)."""

    held: int
    """Frames the writer holds now (an attribute: the gate reads it per chunk)."""

    @property
    def limit(self) -> int:
        """The number of held frames at which a producer that can wait should."""
        ...

    def congested(self) -> bool:
        """Whether the writer holds its limit of frames (a producer that can wait should)."""
        ...

    async def ready(self) -> None:
        """Return once the writer holds fewer frames than its limit (cancellable)."""
        ...


class _Gated:
    """A chunk stream that waits for the writer before each pull."""

    __slots__ = ("_flow", "_inner", "_limit", "_next")

    def __init__(self, inner: AsyncIterator[StreamChunk], flow: FlowControl) -> None:
        self._next = inner.__anext__
        self._limit = flow.limit
        self._flow = flow
        self._inner = inner

    def __aiter__(self) -> _Gated:
        return self

    def __anext__(self) -> Awaitable[StreamChunk]:
        if self._flow.held >= self._limit:
            return self._after_ready()
        return self._next()  # the inner stream's own awaitable: no frame of ours on the chunk path

    async def _after_ready(self) -> StreamChunk:
        await self._flow.ready()
        return await self._next()

    async def aclose(self) -> None:
        aclose: Callable[[], Any] | None = getattr(self._inner, "aclose", None)
        if aclose is not None:
            await aclose()


def stream_gate(flow: FlowControl) -> LlmStreamListener:
    """An ``llm/stream`` waterfall listener that wraps every model stream in the writer's back-pressure."""

    async def gate(
        request: GenerateRequest, next_: Next[GenerateRequest, AsyncIterator[StreamChunk]]
    ) -> AsyncIterator[StreamChunk]:
        return _Gated(await next_(request), flow)

    return gate
