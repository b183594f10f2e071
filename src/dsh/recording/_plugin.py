"""The model side of a recording: an ``llm/stream`` listener that writes each chunk as the adapter streamed it.

The daemon adds this plugin last, so its listener is the innermost of the waterfall: it sees exactly what the
provider's adapter produced, one model call at a time, before any other listener (back-pressure, compaction's
retry) handles it; a replay serves these responses at the same place.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from dsh import events as ev
from dsh.errors import error_code, error_message
from dsh.kernel import plugin

if TYPE_CHECKING:
    from dsh.kernel import Context, Next
    from dsh.recording._recorder import Recorder
    from dsh.services.llm import GenerateRequest, StreamChunk

__all__ = ["recording_plugin"]


def _described(error: BaseException) -> dict[str, Any]:
    described: dict[str, Any] = {"message": error_message(error)}
    code = error_code(error)
    if code is not None:
        described["code"] = code
    return described


async def _recorded(
    recorder: Recorder, n: int, request: GenerateRequest, stream: AsyncIterator[StreamChunk]
) -> AsyncIterator[StreamChunk]:
    signal = request.signal
    end, error = "closed", None
    try:
        async for chunk in stream:
            recorder.model_chunk(n, chunk, aborted=signal is not None and signal.aborted)
            yield chunk
        end = "finished"
    except Exception as exc:
        end, error = "error", _described(exc)
        raise
    finally:
        recorder.model_end(n, end, aborted=signal is not None and signal.aborted, error=error)
        aclose = getattr(stream, "aclose", None)
        if end == "closed" and aclose is not None:
            await aclose()


@plugin("recording")
def recording_plugin(ctx: Context, recorder: Recorder) -> None:
    """Record every model call of this application into *recorder* (see the module docstring)."""

    async def record(
        request: GenerateRequest, next_: Next[GenerateRequest, AsyncIterator[StreamChunk]]
    ) -> AsyncIterator[StreamChunk]:
        n = recorder.model_request(request.model)
        try:
            stream = await next_(request)
        except Exception as exc:
            recorder.model_end(n, "error", aborted=False, error=_described(exc))
            raise
        return _recorded(recorder, n, request, stream)

    ctx.on(ev.LLM_STREAM, record)
