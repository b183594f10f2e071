"""Our stdio transport for MCP servers (instead of the SDK's ``stdio_client``), for three guarantees the SDK's
does not give us:

* the server's stderr goes to our log, line by line (and its last lines explain a failure), never to our stdout
  or stderr; every line is cut to :data:`STDERR_LINE_LIMIT` bytes and has the secrets dsh holds redacted
  (:func:`dsh.secrets.redact_text`) before it is logged or kept;
* lines are split in linear time (:class:`~dsh.mcp._lines.LineSplitter`); a stdout line longer than
  :data:`STDOUT_LINE_LIMIT` is dropped as it arrives, so no output bounds the daemon's memory but these limits;
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

from dsh._jsonlimits import MAX_JSON_DEPTH, text_may_exceed
from dsh._log import get_logger
from dsh.jsonrpc import MAX_LINE, answer_id
from dsh.mcp._lines import Line, LineSplitter
from dsh.secrets import redact_text

__all__ = ["CLOSE_GRACE", "StdioProcess", "answer_id", "kill_group", "stdio_transport"]

CLOSE_GRACE = 0.5
"""Upper bound of the three steps of a close (stdin EOF → SIGTERM → SIGKILL), each a third of it: a daemon that
is told to exit has about 2 s in all, and its sessions' servers close in parallel within that."""
STDOUT_LINE_LIMIT = MAX_LINE
"""Longest JSON-RPC line read from a server (the one cap of :mod:`dsh.jsonrpc`): a longer one is dropped as it
arrives (one log line; the request it answers gets an error at once)."""
STDOUT_MEMORY = 1024 * 1024
"""Bytes of a pending stdout line held in memory; past this the line continues in an anonymous temporary file,
so a server writing without newlines costs the daemon at most this much memory."""
STDERR_LINE_LIMIT = 2000
"""A stderr line is logged (and kept for failure reasons) cut to this many bytes; the rest is discarded."""
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


def describe_parse_error(error: BaseException) -> str:
    return " ".join(str(error).split())[:200]


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

    async def deliver(line: Line) -> None:
        if not line.cut and not line.data.strip():
            return
        problem: str | None = None
        if line.cut:
            problem = f"it is {line.size} bytes long, more than the {STDOUT_LINE_LIMIT} dsh reads"
        else:
            try:
                message = types.JSONRPCMessage.model_validate_json(line.data)
            except Exception as exc:
                problem = (
                    f"it is nested deeper than {MAX_JSON_DEPTH} levels"
                    if text_may_exceed(line.data) and "recursion" in str(exc).lower()
                    else f"it is not JSON-RPC ({redact_text(describe_parse_error(exc))})"
                )
        if problem is None:
            await read_writer.send(SessionMessage(message))
            return
        ident = answer_id(line.data, line.tail)
        log.warning("mcp server wrote a line dsh cannot use; dropped it", server=server, reason=problem, answer=ident)
        if ident is not None:  # the request it answers fails now instead of waiting for an answer that never comes
            error = types.JSONRPCError(
                jsonrpc="2.0",
                id=ident,
                error=types.ErrorData(code=-32603, message=f"the server's answer was dropped: {problem}"),
            )
            await read_writer.send(SessionMessage(types.JSONRPCMessage(error)))

    async def read_stdout() -> None:
        assert process.stdout is not None
        lines = LineSplitter(STDOUT_LINE_LIMIT, memory=STDOUT_MEMORY)
        async with read_writer:
            try:
                async for chunk in process.stdout:
                    for line in lines.feed(chunk):
                        await deliver(line)
                last = lines.close()
                if last is not None:
                    await deliver(last)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
            finally:
                lines.close()
        info.exited.set()

    def log_stderr(line: Line) -> None:
        text = redact_text(line.data.decode("utf-8", "replace").rstrip())
        if line.cut:
            log.warning("mcp server wrote a long stderr line; cut it", server=server, bytes=line.size)
        if text:
            info.stderr_tail.append(text)
            log.info("mcp server stderr", server=server, line=text)

    async def read_stderr() -> None:
        assert process.stderr is not None
        lines = LineSplitter(STDERR_LINE_LIMIT)
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            async for chunk in process.stderr:
                for line in lines.feed(chunk):
                    log_stderr(line)
            last = lines.close()
            if last is not None:
                log_stderr(last)

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
