"""The ``echo`` model: the offline default. It streams the last user message back, one text delta per word (a
session note, the date and the mode the context plugin tells the model as ``<context source="session">``, is not
what the user said: it is passed over).

Deterministic: the same request always yields the same chunks (whitespace kept, so the deltas concatenate to
the original text), then ``usage`` (its input counted once per call by the one estimate,
:func:`~dsh.services.llm.estimate_request`) and ``finish`` ``stop``. It needs no network and no key, which makes it the
model a new user meets first and the one the benchmarks drive.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from dsh.kernel import plugin
from dsh.providers._words import RequestCounter, message_text, word_blocks
from dsh.services.llm import GenerateRequest, StreamChunk

if TYPE_CHECKING:
    from dsh.kernel import Context

__all__ = ["echo_plugin", "echo_stream"]


_SESSION_NOTE = '<context source="session">'
_COUNTER = RequestCounter()
"""The echo model's count of what it is sent (each message once; the figure of ``estimate_request``)."""


async def echo_stream(request: GenerateRequest) -> AsyncIterator[StreamChunk]:
    text = ""
    for message in reversed(request.messages):
        if message["role"] == "user":
            text = message_text(message)
            if text.startswith(_SESSION_NOTE):
                continue
            break
    signal = request.signal
    count = 0
    for pieces in word_blocks(text):
        for piece in pieces:
            if signal is not None and signal.aborted:
                break
            yield {"type": "text-delta", "text": piece}
        count += len(pieces)
    if signal is not None and signal.aborted:
        yield {"type": "finish", "reason": {"kind": "aborted"}}
        return
    yield {
        "type": "usage",
        "usage": {
            "input_tokens": _COUNTER(request),
            "output_tokens": count,
        },
    }
    yield {"type": "finish", "reason": {"kind": "stop"}}


@plugin("echo", inject=("llm",))
def echo_plugin(ctx: Context, config: object) -> None:
    ctx.llm.register_adapter(["echo"], echo_stream)
