"""The process's standard streams, made safe for a JSON-RPC protocol.

Guarantees:

* :func:`claim_stdout` keeps a private duplicate of fd 1 for protocol frames and points fd 1 (and
  ``sys.stdout``) at stderr, so no ``print``, warning, library, C extension or child process can ever write
  into the protocol stream. Call it before anything else runs.
* :class:`StdinReader` reads fd 0 in a daemon thread (a blocked ``read`` never holds up the event loop or
  the process exit) and hands chunks to the event loop through a bounded stream: when the daemon is slow to
  consume, the thread blocks and the editor's writes block in the kernel pipe (back-pressure, no unbounded
  buffering). End of input is an empty chunk.
* :class:`FrameWriter` is the only writer of the protocol fd. Frames are queued without awaiting (so the
  synchronous chunk path can enqueue), written in order, each ending with one newline, batched, and written
  from a worker thread so a slow reader on the other end never blocks the event loop. A write is never cut
  in half by cancellation.
"""

from __future__ import annotations

import os
import sys
import threading
from collections import deque

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = ["FrameWriter", "StdinReader", "claim_stdout"]

_CHUNK = 1 << 16


def claim_stdout() -> int:
    """Return a private fd for protocol output; from now on fd 1 and ``sys.stdout`` are stderr."""
    sys.stdout.flush()
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return protocol_fd


class StdinReader:
    """Chunks of fd *fd* as an async iterator; ends at EOF (or a read error, which is treated as EOF)."""

    def __init__(self, fd: int = 0, *, buffer: int = 64) -> None:
        self._fd = fd
        self._send: MemoryObjectSendStream[bytes]
        self._receive: MemoryObjectReceiveStream[bytes]
        self._send, self._receive = anyio.create_memory_object_stream[bytes](buffer)

    def start(self) -> None:
        token = anyio.lowlevel.current_token()
        thread = threading.Thread(target=self._pump, args=(token,), name="dsh-stdin", daemon=True)
        thread.start()

    def _pump(self, token: anyio.lowlevel.EventLoopToken) -> None:
        try:
            while True:
                try:
                    chunk = os.read(self._fd, _CHUNK)
                except OSError:
                    chunk = b""
                if not chunk:
                    break
                anyio.from_thread.run(self._send.send, chunk, token=token)
        except Exception:  # the event loop is gone: nothing left to feed
            return
        try:
            anyio.from_thread.run_sync(self._send.close, token=token)
        except Exception:
            return

    def __aiter__(self) -> StdinReader:
        return self

    async def __anext__(self) -> bytes:
        try:
            return await self._receive.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class FrameWriter:
    """The single owner of the protocol fd: ``send`` queues a frame, :meth:`run` writes them out."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._queue: deque[bytes] = deque()
        self._wakeup = anyio.Event()
        self._closed = False
        self._drained = anyio.Event()
        self.broken = False

    def send(self, frame: bytes) -> None:
        """Queue one frame (without its newline). Never blocks; dropped once the writer is closed."""
        if self._closed or self.broken:
            return
        self._queue.append(frame)
        self._wakeup.set()

    def close(self) -> None:
        """No more frames: :meth:`run` returns once what was queued is written."""
        self._closed = True
        self._wakeup.set()

    async def drained(self) -> None:
        await self._drained.wait()

    async def run(self) -> None:
        try:
            while True:
                if not self._queue:
                    if self._closed:
                        return
                    await self._wakeup.wait()
                    self._wakeup = anyio.Event()
                    continue
                frames = list(self._queue)
                self._queue.clear()
                frames.append(b"")
                data = b"\n".join(frames)
                with anyio.CancelScope(shield=True):
                    try:
                        await anyio.to_thread.run_sync(_write_all, self._fd, data)
                    except OSError:  # the client closed its end: nothing we write can arrive
                        self.broken = True
                        self._queue.clear()
                        return
        finally:
            self._drained.set()
