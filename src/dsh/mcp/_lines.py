"""Splitting a child's output into lines in linear time and bounded memory.

Why not :class:`dsh.jsonrpc.LineFramer` (the framer of every other JSON-RPC end of dsh, same cap and the same
:data:`~dsh.jsonrpc.HEAD` / :data:`~dsh.jsonrpc.TAIL` of an oversized line): an MCP server is a third party's
program the daemon runs, often several per session, so a pending line is held in memory only up to ``memory``
bytes (1 MiB) and continues in a temporary file up to the cap; the framer holds up to the cap in memory, which is
right for the one client that drives dsh and on the hot path (no spill check per chunk).

The old loop (``buffer += chunk; *lines, buffer = buffer.split(b"\\n")``) copied the whole pending buffer on every
chunk: a server writing without newlines made each read cost the size of everything written so far (quadratic:
+190 MiB per minute, one-second stalls) and nothing bounded the buffer.

Guarantees of :class:`LineSplitter`:

* Each byte fed is looked at a constant number of times: chunks are kept as a list and joined once per line.
* A line longer than ``limit`` bytes is not kept beyond its first ``limit`` bytes: the rest is discarded as it
  arrives (:attr:`Line.cut`); only its first :data:`HEAD` and last :data:`TAIL` bytes are returned
  (:attr:`Line.data`, :attr:`Line.tail`), so the caller can still tell what the line was (a JSON-RPC answer
  names its id at one end or the other).
* With ``memory`` set, a line that grows past ``memory`` bytes is moved to an anonymous temporary file and
  continues there (up to ``limit``): the process holds at most ``memory`` bytes of a pending line, whatever the
  child writes. A completed line is read back whole (the caller asked for lines up to ``limit``).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from typing import IO

from dsh.jsonrpc import HEAD, TAIL

__all__ = ["HEAD", "TAIL", "Line", "LineSplitter"]


@dataclass(frozen=True, slots=True)
class Line:
    data: bytes
    """The line without its newline (only its first :data:`HEAD` bytes when it was cut)."""
    size: int
    """How long the line really was."""
    tail: bytes = b""
    """The last :data:`TAIL` bytes of a line that was cut (empty otherwise)."""

    @property
    def cut(self) -> bool:
        return self.size > len(self.data)


class LineSplitter:
    """Feed chunks, get complete lines (see the module docstring)."""

    __slots__ = ("_kept", "_limit", "_memory", "_pieces", "_size", "_spill", "_tail")

    def __init__(self, limit: int, *, memory: int | None = None) -> None:
        self._limit = limit
        self._memory = limit if memory is None else min(memory, limit)
        self._pieces: list[bytes] = []
        self._kept = 0
        self._size = 0
        self._tail = b""
        self._spill: IO[bytes] | None = None

    def _add(self, piece: bytes) -> None:
        if not piece:
            return
        self._size += len(piece)
        room = self._limit - self._kept
        if room <= 0:
            self._tail = (self._tail + piece[-TAIL:])[-TAIL:]
            return
        kept = piece[:room]
        if len(piece) > room:
            self._tail = piece[-TAIL:]
        self._kept += len(kept)
        if self._spill is None and self._kept > self._memory:
            self._spill = tempfile.TemporaryFile(prefix="dsh-line-")  # noqa: SIM115 - closed in _take
            for held in self._pieces:
                self._spill.write(held)
            self._pieces = []
        if self._spill is not None:
            self._spill.write(kept)
        else:
            self._pieces.append(kept)

    def _take(self) -> Line:
        cut = self._size > self._kept
        if self._spill is not None:
            self._spill.seek(0)
            data = self._spill.read(HEAD if cut else -1)
            self._spill.close()
            self._spill = None
        else:
            data = b"".join(self._pieces)[: HEAD if cut else None]
        line = Line(data, self._size, self._tail if cut else b"")
        self._pieces, self._kept, self._size, self._tail = [], 0, 0, b""
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
        """The last line when the output did not end with a newline (and the temporary file let go)."""
        if self._size:
            return self._take()
        if self._spill is not None:
            self._spill.close()
            self._spill = None
        return None
