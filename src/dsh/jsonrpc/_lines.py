"""Newline framing, sans-IO: bytes in, lines out. No I/O, no event loop, no JSON.

Guarantees:

* ``feed`` may be called with any split of the input; the lines produced are the same for every split.
* A line is the bytes between two ``\\n`` (a trailing ``\\r`` is kept: JSON ignores it as whitespace). At the end
  of input a last line without a newline is still a line.
* A line longer than ``max_line`` is never buffered whole: the framer drops its bytes as they arrive and yields
  one :class:`Oversized` marker when its newline comes (its size, its first :data:`HEAD` and last :data:`TAIL`
  bytes, so the reader can still tell which of its requests it answers), then carries on with the next line.
* Memory held is at most ``max_line`` plus one fed chunk.
* The fast path (a line that lies within one fed chunk) is one ``find`` and one slice: no copy into a buffer.
"""

from __future__ import annotations

from dataclasses import dataclass

from dsh.jsonrpc._ids import answer_id

__all__ = ["HEAD", "MAX_LINE", "TAIL", "LineFramer", "Oversized"]

MAX_LINE = 128 * 1024 * 1024
"""128 MiB, the longest JSON-RPC line any end of dsh reads or sends on (the daemon's stdin, the chat's reading of
its agent, ``dsh bridge``'s stdin, a ``dsh serve`` WebSocket message, an MCP server's stdout, the replay and the
prompt preview). Why this figure: the largest legitimate message is a prompt with images inline as base64 (dsh
takes images up to 20 MB each, 27 MB in base64) or whole files as embedded resources; 128 MiB carries several of
them with room to spare, while one message can still not make a peer hold more than this. It was the daemon's
figure since RFC 0008 (the chat had 64 MiB, so the chat refused answers the daemon could send)."""

HEAD = 4096
"""Bytes of an oversized line kept from its start (its id is there in every common serialisation)."""
TAIL = 256
"""Bytes of an oversized line kept from its end (an answer may name its id last: ``…,"id":7}``)."""


@dataclass(frozen=True, slots=True)
class Oversized:
    """A line longer than the limit, counted and dropped: only its ends are kept."""

    size: int
    head: bytes = b""
    tail: bytes = b""
    limit: int = MAX_LINE

    def answer_id(self) -> int | str | None:
        """The id of the request this line answers, when one of its ends says (see :func:`answer_id`)."""
        return answer_id(self.head, self.tail)


class LineFramer:
    __slots__ = ("_buffer", "_head", "_max", "_skipping", "_tail")

    def __init__(self, max_line: int = MAX_LINE) -> None:
        self._buffer = bytearray()
        self._max = max_line
        self._skipping = -1  # bytes of an oversized line dropped so far, or -1
        self._head = b""
        self._tail = b""

    def _oversized(self, piece: bytes) -> Oversized:
        """The marker of the buffered bytes plus *piece* (the buffer is emptied)."""
        head = (bytes(self._buffer[:HEAD]) + piece[:HEAD])[:HEAD]
        tail = (bytes(self._buffer[-TAIL:]) + piece[-TAIL:])[-TAIL:]
        size = len(self._buffer) + len(piece)
        self._buffer.clear()
        return Oversized(size, head, tail, self._max)

    def _skip(self, piece: bytes) -> None:
        self._skipping += len(piece)
        if len(self._head) < HEAD:
            self._head += piece[: HEAD - len(self._head)]
        self._tail = (self._tail + piece[-TAIL:])[-TAIL:]

    def _skipped(self) -> Oversized:
        marker = Oversized(self._skipping, self._head, self._tail, self._max)
        self._skipping, self._head, self._tail = -1, b"", b""
        return marker

    def feed(self, data: bytes) -> list[bytes | Oversized]:
        """Add *data*; return the lines (and oversize markers) it completed, in order."""
        lines: list[bytes | Oversized] = []
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                break
            piece = data[start:end]
            if self._skipping >= 0:
                self._skip(piece)
                lines.append(self._skipped())
            elif len(self._buffer) + len(piece) > self._max:
                lines.append(self._oversized(piece))
            elif self._buffer:
                self._buffer += piece
                lines.append(bytes(self._buffer))
                self._buffer.clear()
            else:
                lines.append(piece)
            start = end + 1
        rest = data[start:]
        if rest:
            if self._skipping >= 0:
                self._skip(rest)
            elif len(self._buffer) + len(rest) > self._max:
                marker = self._oversized(rest)
                self._skipping, self._head, self._tail = marker.size, marker.head, marker.tail
            else:
                self._buffer += rest
        return lines

    def close(self) -> list[bytes | Oversized]:
        """End of input: a final line without a newline is still a line."""
        if self._skipping >= 0:
            return [self._skipped()]
        if self._buffer:
            line = bytes(self._buffer)
            self._buffer.clear()
            return [line]
        return []
