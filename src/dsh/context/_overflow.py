"""The overflow retry: an agent step the provider rejects as too long (before it streamed anything) is
compacted and retried once; a second overflow fails the turn with a message that says so.

Guarantees: only the first chunk is looked at (inside the step's cancel scope); the rest of the stream is handed
back without a wrapper on the chunk path; only a step request noted by :meth:`OverflowRetry.note` (the agent's
current one) is retried.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import replace
from typing import TYPE_CHECKING

import anyio

from dsh.context._compactor import Compactor
from dsh.context._config import ContextConfig
from dsh.context._state import SessionStates
from dsh.errors import DshError, LlmError, error_code, error_message
from dsh.kernel import AbortedError
from dsh.services.llm import estimate_request

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from dsh.kernel import Context, Next
    from dsh.services.agents import Agent
    from dsh.services.llm import GenerateRequest, StreamChunk

__all__ = ["OVERFLOW_MARKERS", "OverflowRetry", "is_overflow"]


class OverflowRetry:
    """``llm/stream``: one compaction and one retry for an agent step the provider found too long."""

    def __init__(self, ctx: Context, config: ContextConfig, sessions: SessionStates, compactor: Compactor) -> None:
        self._ctx = ctx
        self.config = config
        self._sessions = sessions
        self._compactor = compactor
        self._inflight: dict[int, tuple[GenerateRequest, Agent, int]] = {}
        """id(request) → (request, agent, turn) of each agent's current step request."""

    def note(self, request: GenerateRequest, agent: Agent, turn: int) -> None:
        """*request* is *agent*'s current step request (its previous one is forgotten)."""
        self.forget(agent)
        self._inflight[id(request)] = (request, agent, turn)

    def forget(self, agent: Agent) -> None:
        for key, (_, owner, _) in list(self._inflight.items()):
            if owner is agent:
                del self._inflight[key]

    async def on_stream(
        self, request: GenerateRequest, next_: Next[GenerateRequest, AsyncIterator[StreamChunk]]
    ) -> AsyncIterator[StreamChunk]:
        """``llm/stream``: an agent step the provider rejects as too long (before it streamed anything) is
        compacted and retried once. Only the first chunk is looked at here (the loop awaits this inside the step's
        cancel scope); the rest of the stream is handed back without a wrapper on the chunk path."""
        stream = await next_(request)
        entry = self._inflight.get(id(request))
        if entry is None or entry[0] is not request or not self.config.compaction.enabled:
            return stream
        overflow: Exception
        try:
            first = await anext(stream)
        except StopAsyncIteration:
            return stream
        except LlmError as error:
            if not is_overflow(error):
                raise
            overflow = error
        else:
            if not _is_overflow_finish(first):
                return _Resumed(first, stream)
            message = first["reason"].get("message") if first["type"] == "finish" else None
            overflow = DshError(message or "context window exceeded", "CONTEXT_WINDOW_EXCEEDED")
        await _aclose(stream)
        retry = await self._retry(request, entry[1], overflow)
        return _second_chance(retry, request.model)

    async def _retry(self, request: GenerateRequest, agent: Agent, overflow: Exception) -> AsyncIterator[StreamChunk]:
        said = error_message(overflow)
        try:
            data = await self._compactor.compact_session(
                agent,
                trigger="overflow",
                # the provider says it does not fit, whatever the window we know: keep at most the newest half
                tail_budget=estimate_request(request.messages) // 2,
                model=request.model,
                signal=request.signal,
                system=request.system,
                tools=request.tools,
            )
        except (AbortedError, anyio.get_cancelled_exc_class()):
            raise
        except Exception as error:
            raise DshError(
                f"the conversation does not fit the context window of {request.model} ({said}) and compacting it "
                f"failed: {error_message(error)}",
                "CONTEXT_WINDOW_EXCEEDED",
            ) from error
        if data is None:
            raise DshError(
                f"the conversation does not fit the context window of {request.model} ({said}) and there is no "
                "older history to compact",
                "CONTEXT_WINDOW_EXCEEDED",
            )
        retried = replace(request, messages=agent.session.derive_messages())
        state = self._sessions.get(agent.session.id)
        if state is not None:
            state.accounting.sent_estimate = estimate_request(retried.messages, retried.system, retried.tools)
        result: AsyncIterator[StreamChunk] = await self._ctx.llm.stream(retried)
        return result


OVERFLOW_MARKERS = ("context_length_exceeded", "prompt is too long", "maximum context length", "context window")


def is_overflow(error: BaseException) -> bool:
    """A provider's "the request is too long" (OpenAI ``context_length_exceeded``, Anthropic "prompt is too
    long", HTTP 413)."""
    code = error_code(error)
    if code in ("CONTEXT_WINDOW_EXCEEDED", "HTTP_413"):
        return True
    message = error_message(error).lower()
    return any(marker in message for marker in OVERFLOW_MARKERS)


def _is_overflow_finish(chunk: StreamChunk) -> bool:
    if chunk["type"] != "finish":
        return False
    reason = chunk["reason"]
    return reason["kind"] == "error" and (
        reason.get("code") == "CONTEXT_WINDOW_EXCEEDED"
        or any(marker in (reason.get("message") or "").lower() for marker in OVERFLOW_MARKERS)
    )


async def _aclose(stream: AsyncIterator[StreamChunk]) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        with anyio.CancelScope(shield=True):
            await aclose()


class _Resumed:
    """A stream whose first chunk was already read: that chunk, then the stream itself (one plain call per chunk,
    no generator frame on the chunk path)."""

    __slots__ = ("_first", "_rest")

    def __init__(self, first: StreamChunk, rest: AsyncIterator[StreamChunk]) -> None:
        self._first: StreamChunk | None = first
        self._rest = rest

    def __aiter__(self) -> _Resumed:
        return self

    def __anext__(self) -> Awaitable[StreamChunk]:
        first = self._first
        if first is not None:
            self._first = None
            return _ready(first)
        return self._rest.__anext__()

    async def aclose(self) -> None:
        await _aclose(self._rest)


async def _ready(chunk: StreamChunk) -> StreamChunk:
    return chunk


async def _second_chance(stream: AsyncIterator[StreamChunk], model: str) -> AsyncIterator[StreamChunk]:
    """The retried step's stream; a second overflow fails the turn with a message that says so."""
    try:
        async for chunk in stream:
            if _is_overflow_finish(chunk):
                raise DshError(
                    f"the conversation still does not fit the context window of {model} after compacting it",
                    "CONTEXT_WINDOW_EXCEEDED",
                )
            yield chunk
    except LlmError as error:
        if is_overflow(error):
            raise DshError(
                f"the conversation still does not fit the context window of {model} after compacting it "
                f"({error_message(error)})",
                "CONTEXT_WINDOW_EXCEEDED",
            ) from error
        raise
    finally:
        await _aclose(stream)
