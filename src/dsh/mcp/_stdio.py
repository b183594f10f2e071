"""Our stdio transport for MCP servers (instead of the SDK's ``stdio_client``), for three guarantees the SDK's
does not give us:

* the server's stderr goes to our log, line by line (and its last lines explain a failure), never to our stdout
  or stderr;
* the process runs in its own process group, and closing ends the *group* (stdin closed, then SIGTERM, then
  SIGKILL, within :data:`CLOSE_GRACE` in all), also when the closing task is being cancelled;
* the pid is known, so the owner can end the group synchronously at daemon exit (:func:`kill_group`).

Frames are the SDK's own ``SessionMessage`` objects, so the SDK's ``ClientSession`` runs on top unchanged.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections import deque
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc

from dsh._log import get_logger

__all__ = ["CLOSE_GRACE", "StdioProcess", "kill_group", "stdio_transport"]

CLOSE_GRACE = 0.5
"""Upper bound of the three steps of a close (stdin EOF → SIGTERM → SIGKILL), each a third of it: a daemon that
is told to exit has about 2 s in all, and its sessions' servers close in parallel within that."""
log = get_logger("dsh.mcp")


@dataclass
class StdioProcess:
    """What the owner may know about a running stdio server."""

    pid: int
    stderr_tail: deque[str] = field(default_factory=lambda: deque(maxlen=5))
    exited: anyio.Event = field(default_factory=anyio.Event)
    hurry: bool = False
    """Set by the owner when the daemon is exiting: the close sends SIGTERM at once instead of waiting for the
    server to notice the end of its stdin."""

    def reason(self) -> str:
        """The server's last stderr line, as a suffix for a failure reason (usually the error it died of)."""
        return f" (stderr: {self.stderr_tail[-1][:300]})" if self.stderr_tail else ""


def kill_group(pid: int, sig: int = signal.SIGKILL) -> None:
    """Signal the server's whole process group (it leads its own group); a group already gone is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        os.killpg(pid, sig)


async def _end(process: anyio.abc.Process, info: StdioProcess) -> None:
    """Close stdin, then SIGTERM, then SIGKILL the group, each bounded; shielded so a cancelled owner still
    leaves no process behind."""
    with anyio.CancelScope(shield=True):
        if process.stdin is not None:
            with contextlib.suppress(Exception):
                await process.stdin.aclose()
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with anyio.move_on_after(0 if info.hurry and sig == signal.SIGTERM else CLOSE_GRACE / 3):
                await process.wait()
            if process.returncode is not None:
                break
            kill_group(info.pid, sig)
        with anyio.move_on_after(CLOSE_GRACE / 3):
            await process.wait()
        kill_group(info.pid)  # whatever the server left behind in its group


@asynccontextmanager
async def stdio_transport(
    server: str, command: str, args: list[str], env: Mapping[str, str], cwd: str | None
) -> AsyncIterator[tuple[Any, Any, StdioProcess]]:
    """Start the server; yield ``(read_stream, write_stream, info)`` for ``mcp.ClientSession``."""
    import mcp.types as types
    from mcp.shared.message import SessionMessage

    process = await anyio.open_process(
        [command, *args],
        env=dict(env),
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    info = StdioProcess(process.pid)
    read_writer, read_stream = anyio.create_memory_object_stream[Any](0)
    write_stream, write_reader = anyio.create_memory_object_stream[Any](0)

    async def read_stdout() -> None:
        assert process.stdout is not None
        buffer = b""
        async with read_writer:
            try:
                async for chunk in process.stdout:
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        if not line.strip():
                            continue
                        try:
                            message = types.JSONRPCMessage.model_validate_json(line)
                        except Exception as exc:
                            log.warning("mcp server wrote a non-JSON-RPC line", server=server, error=str(exc)[:200])
                            continue
                        await read_writer.send(SessionMessage(message))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
        info.exited.set()

    async def read_stderr() -> None:
        assert process.stderr is not None
        buffer = b""
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            async for chunk in process.stderr:
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for raw in lines:
                    line = raw.decode("utf-8", "replace").rstrip()
                    if line:
                        info.stderr_tail.append(line)
                        log.info("mcp server stderr", server=server, line=line[:2000])

    async def write_stdin() -> None:
        assert process.stdin is not None
        async with write_reader:
            try:
                async for message in write_reader:
                    data = message.message.model_dump_json(by_alias=True, exclude_none=True)
                    await process.stdin.send(data.encode() + b"\n")
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(read_stdout)
            group.start_soon(read_stderr)
            group.start_soon(write_stdin)
            try:
                yield read_stream, write_stream, info
            finally:
                await _end(process, info)
                group.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            for stream in (read_stream, write_stream, read_writer, write_reader):
                await stream.aclose()
            with contextlib.suppress(Exception):
                await process.aclose()
