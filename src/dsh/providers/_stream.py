"""The streaming adapters' shared prelude and tail: one call's life around a wire format's event decoder.

The three streaming wire formats (Chat Completions :mod:`dsh.providers.openai`, the Responses API
:mod:`dsh.providers.openai_responses`, Anthropic Messages :mod:`dsh.providers.anthropic`) differ in their request
body, their auth header and the meaning of their events; everything around that is here, once
(:func:`sse_adapter`):

* **Prelude.** A call whose signal is already aborted ends with ``finish`` ``aborted`` before anything is read or
  sent; the endpoint (base URL, key) is resolved at call time (a missing key fails before any connection); the
  body is built with the model name and the provider's ``max_tokens``; the stream is opened by
  :meth:`~dsh.providers._http.HttpProvider.open` (retries before the first byte, status errors); an abort while
  opening ends with ``finish`` ``aborted``.
* **Events.** Each event's data is stripped; an empty one is skipped; ``[DONE]`` (the server's end marker) stops
  reading; data that is not JSON raises ``LlmError`` ``BAD_RESPONSE`` (the first 200 characters quoted); JSON that
  is not an object is skipped; the rest go to the decoder, whose chunks are yielded as they come.
* **Tail.** Once the decoder is :attr:`~Decoder.done` the rest of the body is drained briefly (the connection
  stays reusable); the response is closed whatever happens (an error, a cancel, the consumer stopping). Then: an
  aborted stream ends with ``finish`` ``aborted`` and nothing else; a stream that ended before the decoder saw
  the model finish raises ``LlmError`` ``STREAM_INTERRUPTED`` naming what was missing; otherwise exactly one
  ``usage`` (when the server sent any) and one ``finish``, in that order, end the stream.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from dsh.errors import LlmError
from dsh.services.llm import model_name

if TYPE_CHECKING:
    from dsh.providers._http import Endpoint, HttpProvider
    from dsh.services.llm import Adapter, FinishReason, GenerateRequest, StreamChunk, Usage

__all__ = ["Decoder", "bearer", "sse_adapter"]


class Decoder(Protocol):
    """What one call of a wire format makes of its events (a fresh decoder per call)."""

    done: bool
    """Set once the model's answer is complete: no more events are read (the rest is drained)."""
    unfinished: str
    """What a stream that ended too early did not say, for the error (``the model finished (no message_stop)``)."""

    def feed(self, event: str, payload: dict[str, Any]) -> Iterable[StreamChunk]:
        """The chunks one event (its SSE ``event`` name, its JSON object) says; raises ``LlmError`` for an error
        the server put in the stream."""
        ...

    def finish(self) -> FinishReason | None:
        """How the model finished; None when the stream ended before it said (then the call is interrupted)."""
        ...

    def usage(self) -> Usage | None:
        """The usage the server reported, if it did."""
        ...


def bearer(endpoint: Endpoint) -> dict[str, str]:
    """The OpenAI-style auth header (``Authorization: Bearer``), none without a key (local servers)."""
    return {"authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}


def sse_adapter(
    http: HttpProvider,
    path: str,
    headers: Callable[[Endpoint], dict[str, str]],
    build_body: Callable[[GenerateRequest, str, int | None], dict[str, Any]],
    decoder: Callable[[Endpoint], Decoder],
) -> Adapter:
    """An ``llm`` adapter that POSTs *build_body*'s JSON to *path* with *headers* (given the call's endpoint) and
    streams what a fresh *decoder* makes of the events (see the module docstring)."""

    async def stream(request: GenerateRequest) -> AsyncIterator[StreamChunk]:
        signal = request.signal
        if signal is not None and signal.aborted:
            yield {"type": "finish", "reason": {"kind": "aborted"}}
            return
        endpoint = http.endpoint()
        body = build_body(request, model_name(request.model), http.settings.max_tokens)
        events = await http.open(endpoint, path, headers(endpoint), body, signal)
        if events is None:
            yield {"type": "finish", "reason": {"kind": "aborted"}}
            return
        decode = decoder(endpoint)
        try:
            while not decode.done:
                event = await events.next()
                if event is None:
                    break
                data = event.data.strip()
                if not data:
                    continue
                if data == "[DONE]":
                    decode.done = True
                    break
                try:
                    payload: Any = json.loads(data)
                except ValueError:
                    raise http.error(f"unreadable event in the stream: {data[:200]!r}", "BAD_RESPONSE", None) from None
                if isinstance(payload, dict):
                    for chunk in decode.feed(event.event, payload):
                        yield chunk
            if decode.done:
                await events.drain()
        finally:
            await events.aclose()
        if events.aborted:
            yield {"type": "finish", "reason": {"kind": "aborted"}}
            return
        finish = decode.finish()
        if finish is None:
            raise LlmError(
                f"{http.name}: the stream ended before {decode.unfinished}; the server or a proxy cut the answer short",
                "STREAM_INTERRUPTED",
            )
        usage = decode.usage()
        if usage is not None:
            yield {"type": "usage", "usage": usage}
        yield {"type": "finish", "reason": finish}

    return stream
