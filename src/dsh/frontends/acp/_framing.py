"""Newline framing, sans-IO: bytes in, frames out. No I/O, no event loop, no JSON.

Guarantees:

* ``feed`` may be called with any split of the input; the frames produced are the same for every split.
* A frame is the bytes between two ``\\n`` (a trailing ``\\r`` is kept: JSON ignores it as whitespace).
* A frame longer than ``max_frame`` is never buffered whole: the framer drops its bytes as they arrive and
  yields one :class:`Oversized` marker (with the size seen) when its newline comes, then carries on.
* Memory held is at most ``max_frame`` plus one fed chunk.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_MAX_FRAME", "LineFramer", "Oversized"]

DEFAULT_MAX_FRAME = 128 * 1024 * 1024
"""128 MiB: images arrive inline as base64, and the issue asks for at least 64 MiB."""


@dataclass(frozen=True, slots=True)
class Oversized:
    size: int


class LineFramer:
    __slots__ = ("_buffer", "_max", "_skipping")

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self._buffer = bytearray()
        self._max = max_frame
        self._skipping = -1  # bytes of an oversized frame dropped so far, or -1

    def feed(self, data: bytes) -> list[bytes | Oversized]:
        """Add *data*; return the frames (and oversize markers) it completed, in order."""
        frames: list[bytes | Oversized] = []
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                break
            piece = data[start:end]
            if self._skipping >= 0:
                frames.append(Oversized(self._skipping + len(piece)))
                self._skipping = -1
            elif len(self._buffer) + len(piece) > self._max:
                frames.append(Oversized(len(self._buffer) + len(piece)))
                self._buffer.clear()
            elif self._buffer:
                self._buffer += piece
                frames.append(bytes(self._buffer))
                self._buffer.clear()
            else:
                frames.append(piece)
            start = end + 1
        rest = data[start:]
        if rest:
            if self._skipping >= 0:
                self._skipping += len(rest)
            elif len(self._buffer) + len(rest) > self._max:
                self._skipping = len(self._buffer) + len(rest)
                self._buffer.clear()
            else:
                self._buffer += rest
        return frames

    def close(self) -> list[bytes | Oversized]:
        """End of input: a final frame without a newline is still a frame."""
        if self._skipping >= 0:
            size, self._skipping = self._skipping, -1
            return [Oversized(size)]
        if self._buffer:
            frame = bytes(self._buffer)
            self._buffer.clear()
            return [frame]
        return []
