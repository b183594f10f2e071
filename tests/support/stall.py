"""A client that can stop reading: ``dsh acp`` with its stdout on a pipe this module owns, read only when asked.

:mod:`tests.support.raw` reads through asyncio's subprocess transport, which keeps reading into its own buffer
whatever the test does; a client that *stops reading* needs the pipe itself. Here the daemon's stdout is a raw
``os.pipe()``: nothing reads it until :meth:`StallingDaemon.read` is called, so the pipe really fills up, and
:meth:`StallingDaemon.wait_pipe_full` says when it has (a poll of a second descriptor of the write end), which is the
event a stalled-client test synchronises on.

Every line read passes :func:`tests.support.raw.check_frame`; ``session/update`` notifications are also
validated against the ACP SDK's schema model.
"""

from __future__ import annotations

import fcntl
import os
import select
import subprocess
import sys
import termios
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from acp.schema import SessionNotification

from tests.support.raw import check_frame, compact, daemon_env

__all__ = ["StallingDaemon", "spawn_stalling"]

_F_GETPIPE_SZ = 1032  # fcntl.F_GETPIPE_SZ (Linux), named in the fcntl module only from Python 3.10 on some builds


class StallingDaemon:
    def __init__(self, process: anyio.abc.Process, stdout_fd: int, probe_fd: int, data_dir: Path) -> None:
        assert process.stdin is not None
        self.process = process
        self._probe = probe_fd
        self.data_dir = data_dir
        self._stdin = process.stdin
        self._fd = stdout_fd
        self._buffer = bytearray()
        self._ids = 0
        self.capacity = fcntl.fcntl(stdout_fd, _F_GETPIPE_SZ)

    # -- writing ------------------------------------------------------------------------------------------

    async def send(self, message: dict[str, Any]) -> None:
        await self._stdin.send(compact(message).encode() + b"\n")

    async def request(self, method: str, params: dict[str, Any]) -> int:
        self._ids += 1
        await self.send({"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params})
        return self._ids

    async def close_stdin(self) -> None:
        await self._stdin.aclose()

    # -- reading ------------------------------------------------------------------------------------------

    async def read(self) -> dict[str, Any]:
        """The next message (checked; a ``session/update`` also validated against the SDK's schema)."""
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                message = check_frame(line)
                if message.get("method") == "session/update":
                    SessionNotification.model_validate(message["params"])
                return message
            await anyio.wait_readable(self._fd)
            chunk = os.read(self._fd, 1 << 16)
            if not chunk:
                raise EOFError("the daemon closed its stdout")
            self._buffer += chunk

    async def response(self, request_id: int, updates: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """Read up to the answer to *request_id*; the ``session/update`` params on the way go to *updates*."""
        while True:
            message = await self.read()
            if "method" in message:
                if updates is not None and message["method"] == "session/update":
                    updates.append(message["params"])
                continue
            if message.get("id") == request_id:
                return message

    def unread(self) -> int:
        """Bytes waiting in the pipe (written by the daemon, not yet read by us)."""
        size = bytearray(4)
        fcntl.ioctl(self._fd, termios.FIONREAD, size)
        return int.from_bytes(size, sys.byteorder)

    def pipe_full(self) -> bool:
        """Whether the pipe is full: a writer would block (poll of a second descriptor of its write end)."""
        return not select.select([], [self._probe], [], 0)[1]

    async def wait_pipe_full(self) -> None:
        """Return once the pipe is full: the daemon can write no more until we read."""
        while True:  # the kernel offers no notification for "the pipe became full": poll (bounded by the
            if self.pipe_full():  # caller's fail_after)
                return
            await anyio.sleep(0.005)

    def rss_bytes(self) -> int:
        """The daemon's resident set size."""
        with open(f"/proc/{self.process.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS in /proc/<pid>/status")


@asynccontextmanager
async def spawn_stalling(
    tmp_path: Path, *, model: str = "echo", env: Mapping[str, str] | None = None
) -> AsyncIterator[StallingDaemon]:
    """``python -m dsh acp`` with stdin a pipe (the process's) and stdout a pipe this client reads only on demand;
    sessions in ``tmp_path/data``. On leaving, the process is killed if it is still running, and reaped."""
    data_dir = tmp_path / "data"
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    probe_fd = os.dup(write_fd)  # never written: only polled, to see when the pipe is full
    try:
        with (tmp_path / "stderr.log").open("wb") as stderr:
            process = await anyio.open_process(
                [sys.executable, "-m", "dsh", "acp"],
                stdin=subprocess.PIPE,
                stdout=write_fd,
                stderr=stderr,
                env=daemon_env(
                    model, extra={"DSH_DATA_DIR": str(data_dir), "XDG_DATA_HOME": str(data_dir), **(env or {})}
                ),
            )
    finally:
        os.close(write_fd)
    daemon = StallingDaemon(process, read_fd, probe_fd, data_dir)
    try:
        yield daemon
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                with suppress(ProcessLookupError):
                    process.kill()
            await process.wait()
            await process.aclose()
            os.close(read_fd)
            os.close(probe_fd)
