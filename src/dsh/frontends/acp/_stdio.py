"""The process's standard streams, made safe for a JSON-RPC protocol.

Guarantees:

* :func:`claim_stdout` keeps a private duplicate of fd 1 for protocol frames and points fd 1 (and
  ``sys.stdout``) at stderr, so no ``print``, warning, library, C extension or child process can ever write
  into the protocol stream. Call it before anything else runs.
* :class:`StdinReader` reads fd 0 in a daemon thread (a blocked ``read`` never holds up the event loop or
  the process exit) and hands chunks to the event loop through a bounded stream: when the daemon is slow to
  consume, the thread blocks and the editor's writes block in the kernel pipe (back-pressure, no unbounded
  buffering). End of input is an empty chunk.
* :class:`FrameWriter` is the only writer of the protocol fd. Frames are sent without awaiting (so the
  synchronous chunk path can send), written in order, each ending with one newline, from the event loop with
  no thread hop (non-blocking writes; the loop's writability wait when the pipe is full), so a slow reader on
  the other end never blocks the event loop. :meth:`FrameWriter.ready` is the back-pressure a producer that
  can wait (the model stream) awaits: at most :data:`BACKLOG_LIMIT` frames are ever held for it.
"""

from __future__ import annotations

import os
import stat
import sys
import threading
from collections import deque

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = ["BACKLOG_LIMIT", "Backlog", "FrameWriter", "StdinReader", "claim_stdout"]

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


BACKLOG_LIMIT = 128
"""Frames the writer may hold before :meth:`FrameWriter.ready` makes producers wait (the model stream's
back-pressure): with a client that stops reading, dsh's memory stays flat at about this many frames. It also
bounds what a ``session/cancel``'s answer queues behind (with the pipe's own 64 KiB): 128 rather than 256 took
the p99 of a cancel during a 2M-word reply from 9.6-10.2 ms to 6.8 ms at no measurable cost in throughput
(RFC 0008)."""


def _can_block(fd: int) -> bool:
    """Whether writes to *fd* can block for as long as the reader likes (a pipe or a socket): only those are
    made non-blocking. A tty or a regular file is written as it is (setting ``O_NONBLOCK`` on a terminal
    would leak into the shell that shares it)."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class Backlog:
    """The frames a writer holds and the wait of :class:`~dsh.frontends.acp._backpressure.FlowControl` over them:
    :meth:`ready` returns once fewer than :attr:`limit` are held, or the writer is closed or broken. Shared by the
    stdio :class:`FrameWriter` and ``dsh serve``'s WebSocket writer; the subclass counts :attr:`held` and calls
    :meth:`_notify_space` when it drops or when the writer closes or breaks."""

    def __init__(self, limit: int = BACKLOG_LIMIT) -> None:
        self._limit = limit
        self._space: anyio.Event | None = None
        self._closed = False
        self.broken = False
        self.held = 0
        """Frames accepted and not yet handed (whole) to the kernel (an attribute kept current, so a producer
        checks it per chunk without a call)."""

    @property
    def limit(self) -> int:
        """How many frames :meth:`ready` lets be held before a producer that can wait waits."""
        return self._limit

    def congested(self) -> bool:
        """Whether the writer holds its limit of frames: a producer that can wait should :meth:`ready`."""
        return self.held >= self._limit

    async def ready(self) -> None:
        """Return once fewer than the limit's frames are held (at once when they are, or when the writer is
        closed or broken). Cancellable."""
        while self.held >= self._limit and not (self._closed or self.broken):
            if self._space is None:
                self._space = anyio.Event()
            await self._space.wait()

    def _notify_space(self) -> None:
        if self._space is not None and (self.held < self._limit or self._closed or self.broken):
            self._space.set()
            self._space = None


class FrameWriter(Backlog):
    """The single owner of the protocol fd: :meth:`send` is the one ordered send path, :meth:`run` finishes
    writes the kernel could not take at once.

    Frames are written from the event loop, with no thread hop: the first frame after an idle moment is
    written by :meth:`send` itself (the lowest latency there is), later ones are batched and written by
    :meth:`run` on its next turn. On a pipe or socket the fd is non-blocking, so a full pipe (a client that
    does not read) never blocks the loop: the rest waits in memory and :meth:`run` waits for writability.
    :meth:`ready` lets a producer that can wait (the model stream) wait while :data:`BACKLOG_LIMIT` frames are
    held, so that memory stays bounded; frames from :meth:`send` are never refused, dropped or reordered.

    Cancelling :meth:`run` stops writing at once (shutdown with a client that does not read must not wait for
    it); whatever was not handed to the kernel is dropped, and the fd's blocking mode is restored.
    """

    def __init__(self, fd: int, *, limit: int = BACKLOG_LIMIT) -> None:
        super().__init__(limit)
        self._fd = fd
        self._queue: deque[bytes] = deque()
        self._batch: memoryview | None = None  # a joined batch the kernel has only partly taken
        self._batch_frames = 0
        self._wakeup = anyio.Event()
        self._sleeping = False
        self._drained = anyio.Event()
        self._running = False
        self._restore_blocking: bool | None = None

    def send(self, frame: bytes) -> None:
        """Queue one frame (without its newline), in order. Never blocks; dropped once the writer is closed or
        the client has gone."""
        if self._closed or self.broken:
            return
        if self._running and self._sleeping and not self._queue and self._batch is None:
            self._write_now(frame + b"\n")
            self._wake()  # frames sent before the loop's next turn are batched by run(), not written one by one
            return
        self._queue.append(frame)
        self.held += 1
        if self._sleeping:
            self._sleeping = False
            self._wakeup.set()

    def close(self) -> None:
        """No more frames: :meth:`run` returns once what was queued is written."""
        self._closed = True
        self._wake()
        self._notify_space()

    async def drained(self) -> None:
        await self._drained.wait()

    def _wake(self) -> None:
        if self._sleeping:
            self._sleeping = False
            self._wakeup.set()

    def _fail(self) -> None:
        """The client closed its end: nothing we write can arrive."""
        self.broken = True
        self._queue.clear()
        self._batch = None
        self._batch_frames = 0
        self.held = 0
        self._notify_space()
        self._wake()

    def _write_now(self, data: bytes) -> None:
        """One write from :meth:`send`; what the kernel does not take becomes the pending batch."""
        try:
            written = os.write(self._fd, data)
        except BlockingIOError:
            written = 0
        except OSError:
            self._fail()
            return
        if written < len(data):
            self._batch = memoryview(data)[written:]
            self._batch_frames = 1
            self.held = 1
            self._wake()

    def _flush(self) -> bool:
        """Write as much as the kernel takes without blocking; True when nothing is left."""
        while True:
            if self._batch is None:
                if not self._queue:
                    return True
                frames = self._queue
                self._batch_frames = len(frames)
                frames.append(b"")
                data = b"\n".join(frames)
                frames.clear()
                self._batch = memoryview(data)
            try:
                written = os.write(self._fd, self._batch)
            except BlockingIOError:
                return False
            except OSError:
                self._fail()
                return True
            if written < len(self._batch):
                self._batch = self._batch[written:]
                return False
            self.held -= self._batch_frames
            self._batch = None
            self._batch_frames = 0
            self._notify_space()

    async def run(self) -> None:
        if _can_block(self._fd):
            blocking = os.get_blocking(self._fd)
            if blocking:
                os.set_blocking(self._fd, False)
                self._restore_blocking = True
        self._running = True
        try:
            while True:
                if self._flush():
                    if self.broken or (self._closed and not self._queue):
                        return
                    self._sleeping = True
                    await self._wakeup.wait()
                    self._wakeup = anyio.Event()
                else:
                    try:
                        await anyio.wait_writable(self._fd)
                    except OSError:  # the fd cannot be waited on: nothing more can be written
                        self._fail()
                        return
        finally:
            self._running = False
            self._sleeping = False
            if self._restore_blocking:
                try:
                    os.set_blocking(self._fd, True)
                except OSError:
                    pass
            self._drained.set()
            self._notify_space()
