"""Lines from an anyio byte stream (a child's stdout, a socket): the framer of :mod:`._lines` on a stream.

Guarantees: the same lines as :class:`~dsh.jsonrpc.LineFramer` for the same bytes (an oversized line is one
:class:`~dsh.jsonrpc.Oversized` and reading goes on); the stream ending, closing or breaking ends the lines
(after a last line without a newline); at most ``max_line`` plus one received chunk is held.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from dsh.jsonrpc._lines import MAX_LINE, LineFramer, Oversized

if TYPE_CHECKING:
    from anyio.abc import ByteReceiveStream

__all__ = ["read_lines"]


async def read_lines(stream: ByteReceiveStream, max_line: int = MAX_LINE) -> AsyncIterator[bytes | Oversized]:
    """Every line of *stream* (without its newline), in order, until the stream ends."""
    import anyio

    framer = LineFramer(max_line)
    while True:
        try:
            chunk = await stream.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            break
        for line in framer.feed(chunk):
            yield line
    for line in framer.close():
        yield line
