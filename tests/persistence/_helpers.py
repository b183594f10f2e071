"""Shared helpers for the durable-session tests: files on disk, spies on the backend's ``os``, subprocesses."""

from __future__ import annotations

import errno
import json
import os
import sys
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import pytest

from dsh.app import load_core
from dsh.kernel import App, Context, Disposer
from dsh.plugins.persistence import _jsonl
from dsh.plugins.persistence._format import encode_event, encode_header
from dsh.services.llm import ContentBlock
from dsh.services.sessions import Session, SessionEvent, SessionHeader

INTERRUPTED_TEXT = "Tool call interrupted by a crash; no result was recorded."
INTERRUPTED_ERROR = {"name": "InterruptedError", "code": "interrupted"}


def text(value: str) -> list[ContentBlock]:
    return [{"type": "text", "text": value}]


def header(session_id: str, **extra: Any) -> SessionHeader:
    return SessionHeader(id=session_id, created_at=1_700_000_000.5, **extra)


def events_of(*specs: tuple[str, dict[str, Any]]) -> list[SessionEvent]:
    """Events with contiguous seqs from ``(type, data)`` pairs."""
    return [SessionEvent(kind, seq, 1_700_000_001.0 + seq, data) for seq, (kind, data) in enumerate(specs)]


def file_bytes(head: SessionHeader, events: Iterable[SessionEvent]) -> bytes:
    return encode_header(head) + b"".join(encode_event(event) for event in events)


def open_turn(turn: int = 1, call_id: str = "call_1") -> list[tuple[str, dict[str, Any]]]:
    """A turn cut by a crash: started, user message, a step open, a tool call without result."""
    return [
        ("turn/start", {"turn": turn, "trigger": {"kind": "message", "source": {"kind": "user"}}}),
        ("user/message", {"content": text("crash please"), "source": {"kind": "user"}}),
        ("step/start", {"turn": turn, "step": 1}),
        ("tool/call", {"turn": turn, "step": 1, "call_id": call_id, "name": "lookup", "arguments": "{}"}),
    ]


def closed_turn(turn: int = 1, words: str = "hello") -> list[tuple[str, dict[str, Any]]]:
    return [
        ("turn/start", {"turn": turn, "trigger": {"kind": "message", "source": {"kind": "user"}}}),
        ("user/message", {"content": text(words), "source": {"kind": "user"}}),
        ("step/start", {"turn": turn, "step": 1}),
        ("assistant/chunk", {"turn": turn, "step": 1, "chunk": {"type": "text-delta", "text": words}}),
        ("assistant/message", {"turn": turn, "step": 1, "content": text(words)}),
        ("step/end", {"turn": turn, "step": 1}),
        ("turn/end", {"turn": turn, "reason": {"kind": "completed"}}),
    ]


def released(events: Sequence[SessionEvent]) -> list[SessionEvent]:
    """*events* without the streamed chunks of closed steps: what a live session keeps in memory once its
    file holds them (``Session.release_chunks``); the file itself keeps every chunk."""
    closed = {(e.data.get("turn"), e.data.get("step")) for e in events if e.type in ("assistant/message", "step/end")}
    return [e for e in events if e.type != "assistant/chunk" or (e.data.get("turn"), e.data.get("step")) not in closed]


def assert_balanced(events: Sequence[SessionEvent]) -> None:
    """Seqs contiguous from 0; every turn/start has its turn/end; steps nest in turns; every tool/call has its
    tool/result inside the same turn."""
    assert [event.seq for event in events] == list(range(len(events)))
    turn: int | None = None
    step_open = False
    calls: set[str] = set()
    for event in events:
        data = event.data
        match event.type:
            case "turn/start":
                assert turn is None, f"turn/start inside turn {turn} at seq {event.seq}"
                turn = data["turn"]
            case "turn/end":
                assert turn == data["turn"], f"turn/end {data['turn']} closes turn {turn}"
                assert not step_open, f"turn {turn} ends with a step open"
                assert not calls, f"turn {turn} ends with calls {calls} without result"
                turn = None
            case "step/start":
                assert turn is not None and not step_open
                step_open = True
            case "step/end":
                assert turn is not None and step_open
                step_open = False
            case "tool/call":
                assert turn is not None
                calls.add(data["call_id"])
            case "tool/result":
                assert turn is not None
                calls.remove(data["call_id"])
    assert turn is None, f"turn {turn} is never closed"


def lines_of(path: Path) -> list[dict[str, Any]]:
    content = path.read_bytes()
    assert content.endswith(b"\n")
    return [json.loads(line) for line in content.split(b"\n")[:-1]]


def disk_events(path: Path) -> list[dict[str, Any]]:
    return lines_of(path)[1:]


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path under *root* (directories map to None), to compare before and after."""
    out: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        out[str(path.relative_to(root))] = None if path.is_dir() else path.read_bytes()
    return out


def fds_open_to(path: Path) -> list[int]:
    """This process's file descriptors that refer to *path* (also once it is unlinked)."""
    found = []
    target = str(path)
    for name in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if link in (target, f"{target} (deleted)"):
            found.append(int(name))
    return found


def lock_is_free(path: Path) -> bool:
    """Whether an exclusive ``flock`` on *path* can be taken now (a separate open file description, so a
    lock held by this very process through another descriptor counts as taken)."""
    import fcntl

    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


async def checkpoints_until(predicate: Any, *, limit: int = 50) -> None:
    """Yield to the event loop until *predicate()* holds: at most *limit* checkpoints, never a timed sleep."""
    with anyio.fail_after(5):
        for _ in range(limit):
            if predicate():
                return
            await anyio.lowlevel.checkpoint()
    assert predicate(), f"not true after {limit} event-loop checkpoints"


# -- a spy standing in for the backend module's ``os`` ----------------------------------------------------


@dataclass
class OsSpy:
    """Delegates to :mod:`os`, recording what the backend asks of it (install with :func:`spy_os`)."""

    fsyncs: list[tuple[str, int]] = field(default_factory=list)
    """(path the descriptor names, file size at the time of the fsync)."""
    opens: list[str] = field(default_factory=list)
    renames: list[tuple[str, str, bytes, bool]] = field(default_factory=list)
    """(source, destination, source content, destination existed) at the time of each rename."""
    truncates: list[int] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)

    def fsync(self, fd: int) -> None:
        self.calls.append("fsync")
        self.fsyncs.append((os.readlink(f"/proc/self/fd/{fd}"), os.fstat(fd).st_size))
        os.fsync(fd)

    def open(self, path: Any, flags: int, mode: int = 0o777) -> int:
        self.calls.append("open")
        self.opens.append(str(path))
        return os.open(path, flags, mode)

    def rename(self, source: Any, destination: Any) -> None:
        self.calls.append("rename")
        self.renames.append((str(source), str(destination), Path(source).read_bytes(), Path(destination).exists()))
        os.rename(source, destination)

    def ftruncate(self, fd: int, length: int) -> None:
        self.calls.append("ftruncate")
        self.truncates.append(length)
        os.ftruncate(fd, length)

    def write(self, fd: int, data: Any) -> int:
        self.calls.append("write")
        return os.write(fd, data)


class DiskFull:
    """While :attr:`on`, every write and fsync of the backend fails with ENOSPC (after writing part of the data,
    as a real full disk does)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.on = False
        self.failures = 0
        real_write_all, real_fsync = _jsonl._write_all, _jsonl._fsync

        def write_all(fd: int, data: bytes) -> None:
            if self.on:
                self.failures += 1
                os.write(fd, data[: len(data) // 2])
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            real_write_all(fd, data)

        def fsync(fd: int) -> None:
            if self.on:
                self.failures += 1
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            real_fsync(fd)

        monkeypatch.setattr(_jsonl, "_write_all", write_all)
        monkeypatch.setattr(_jsonl, "_fsync", fsync)


def spy_os(monkeypatch: pytest.MonkeyPatch) -> OsSpy:
    spy = OsSpy()
    monkeypatch.setattr(_jsonl, "os", spy)
    return spy


# -- applications -------------------------------------------------------------------------------------------


@asynccontextmanager
async def lifetime(data_dir: Path) -> AsyncIterator[Context]:
    """One process lifetime: the core plugins with JSONL persistence in *data_dir*."""
    async with App() as application:
        load_core(application.ctx, data_dir=data_dir)
        yield application.ctx


def open_session(ctx: Context, session_id: str, meta: dict[str, Any] | None = None) -> tuple[Session, Disposer]:
    """A live session (``session/created`` emitted) and the detacher that emits ``session/disposed``."""
    session = ctx.sessions.prepare(session_id, meta=meta)
    detach = ctx.sessions.enter(session)
    ctx.sessions.announce(session)
    return session, detach


# -- other processes ----------------------------------------------------------------------------------------

_LOAD_SCRIPT = """
import sys, anyio
from pathlib import Path
from dsh.plugins.persistence import JsonlPersistence, SessionLockedError

async def main() -> None:
    persistence = JsonlPersistence(Path(sys.argv[1]))
    try:
        loaded = await persistence.load(sys.argv[2])
    except SessionLockedError as error:
        print("LOCKED", error.code)
    else:
        print("LOADED", len(loaded.events))
        persistence.release(sys.argv[2])

anyio.run(main)
"""

_TRY_LOCK_SCRIPT = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    print("BUSY")
else:
    print("FREE")
"""

_HOLD_LOCK_SCRIPT = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("HELD", flush=True)
sys.stdin.read()
"""


async def run_python(script: str, *args: str) -> str:
    with anyio.fail_after(20):
        result = await anyio.run_process([sys.executable, "-c", script, *args], check=False)
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.decode().strip()


async def load_in_other_process(root: Path, session_id: str) -> str:
    """``JsonlPersistence(root).load(session_id)`` in another process: ``LOCKED <code>`` or ``LOADED <n>``."""
    return await run_python(_LOAD_SCRIPT, str(root), session_id)


async def lockable_by_other_process(path: Path) -> bool:
    answer = await run_python(_TRY_LOCK_SCRIPT, str(path))
    assert answer in ("FREE", "BUSY"), answer
    return answer == "FREE"


@asynccontextmanager
async def held_by_other_process(path: Path) -> AsyncIterator[None]:
    """Another process holds an exclusive ``flock`` on *path* for the duration of the block."""
    import subprocess

    with anyio.fail_after(20):
        process = await anyio.open_process(
            [sys.executable, "-c", _HOLD_LOCK_SCRIPT, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
    async with process:
        assert process.stdout is not None and process.stdin is not None
        received = b""
        with anyio.fail_after(20):
            while not received.endswith(b"\n"):
                received += await process.stdout.receive()
        assert received == b"HELD\n"
        try:
            yield
        finally:
            await process.stdin.aclose()
            with anyio.fail_after(20):
                await process.wait()
