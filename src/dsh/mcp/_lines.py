"""Splitting a child's output into lines in linear time and bounded memory.

The old loop (``buffer += chunk; *lines, buffer = buffer.split(b"\\n")``) copied the whole pending buffer on every
chunk: a server writing without newlines made each read cost the size of everything written so far (quadratic:
+190 MiB per minute, one-second stalls) and nothing bounded the buffer.

Guarantees of :class:`LineSplitter`:

* Each byte fed is looked at a constant number of times: chunks are kept as a list and joined once per line.
* A line longer than ``limit`` bytes is not kept beyond its first ``limit`` bytes: the rest is discarded as it
  arrives. The line is then delivered cut (``cut=True``), or not at all when the caller says it cannot use a cut
  line; either way memory stays within ``limit`` plus one chunk.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Line", "LineSplitter"]


@dataclass(frozen=True, slots=True)
class Line:
    data: bytes
    """The line without its newline (its first ``limit`` bytes when it was cut)."""
    size: int
    """How long the line really was."""

    @property
    def cut(self) -> bool:
        return self.size > len(self.data)


class LineSplitter:
    """Feed chunks, get complete lines (see the module docstring)."""

    __slots__ = ("_kept", "_limit", "_pieces", "_size")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._pieces: list[bytes] = []
        self._kept = 0
        self._size = 0

    def _add(self, piece: bytes) -> None:
        self._size += len(piece)
        room = self._limit - self._kept
        if room > 0 and piece:
            kept = piece[:room]
            self._pieces.append(kept)
            self._kept += len(kept)

    def _take(self) -> Line:
        line = Line(b"".join(self._pieces), self._size)
        self._pieces, self._kept, self._size = [], 0, 0
        return line

    @property
    def pending(self) -> int:
        """Bytes of the current (unfinished) line seen so far."""
        return self._size

    def feed(self, chunk: bytes) -> list[Line]:
        """The lines *chunk* completes, in order."""
        lines: list[Line] = []
        start = 0
        while True:
            newline = chunk.find(b"\n", start)
            if newline == -1:
                self._add(chunk[start:])
                return lines
            self._add(chunk[start:newline])
            lines.append(self._take())
            start = newline + 1

    def close(self) -> Line | None:
        """The last line when the output did not end with a newline."""
        return self._take() if self._size else None
