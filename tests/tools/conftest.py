"""Fixtures for the built-in tools (``core``, the full application, comes from ``tests/conftest.py``): a fake agent whose session lives in a temporary
directory, and helpers to call a tool and to watch child processes (through ``/proc``: a reparented child that
died stays a zombie in a container whose PID 1 does not reap, so "gone" means absent or a zombie)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from dsh.kernel import CancelToken, Context
from dsh.services.tools import ToolExecution, ToolResult


@dataclass
class FakeHeader:
    cwd: str | None


@dataclass
class FakeSession:
    header: FakeHeader
    id: str = "session-1"


@dataclass
class FakeAgent:
    """Just what the tools read from an agent: ``session.header.cwd`` and ``session.id``."""

    session: FakeSession = field(default_factory=lambda: FakeSession(FakeHeader(None)))

    @classmethod
    def at(cls, cwd: Path | str, session_id: str = "session-1") -> FakeAgent:
        return cls(FakeSession(FakeHeader(str(cwd)), session_id))


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """The session's directory (``tmp_path/work``); ``tmp_path`` itself is "outside"."""
    directory = tmp_path / "work"
    directory.mkdir()
    return directory


@pytest.fixture
def agent(work: Path) -> FakeAgent:
    return FakeAgent.at(work)


Call = Callable[..., Any]


@pytest.fixture
def call(core: Context, agent: FakeAgent) -> Call:
    """``await call(name, arguments, call_id=..., signal=..., agent=...)`` → the :class:`ToolResult`."""

    async def run(
        name: str,
        arguments: Any,
        *,
        call_id: str = "call-1",
        signal: CancelToken | None = None,
        on: Any = None,
    ) -> ToolResult:
        with anyio.fail_after(20):
            who: Any = on if on is not None else agent  # duck-typed: the tools read session.header.cwd and id
            result: ToolResult = await core.tools.execute(ToolExecution(call_id, name, arguments, who, signal))
        return result

    return run


def text(result: ToolResult) -> str:
    return "".join(block["text"] for block in result.content if block["type"] == "text")


# -- processes ------------------------------------------------------------------------------------------------


def _stat_fields(pid: int) -> list[str] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat.rsplit(")", 1)[1].split()  # state, ppid, pgrp, …


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of the process group *pgid*."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields is not None and fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
                members.append(int(entry))
    return members


async def wait_for_file(path: Path, within: float = 10.0) -> str:
    """The content of *path* once a child wrote a full line to it (a child process cannot set our events, so
    this polls, bounded by *within* seconds)."""
    file = anyio.Path(path)
    with anyio.fail_after(within):
        while True:
            if await file.exists():
                content = await file.read_text()
                if content.endswith("\n"):
                    return content.strip()
            await anyio.sleep(0.01)


async def wait_until_dead(pgid: int, *pids: int, within: float) -> None:
    """Every process of the group *pgid* and every pid given is dead (or a zombie) within *within* seconds.
    SIGKILL is delivered asynchronously: a process may show as running for a moment after ``killpg``."""
    with anyio.fail_after(max(within, 0.01)):
        while True:
            if not group_members(pgid) and not any(alive(pid) for pid in pids):
                return
            await anyio.sleep(0.01)


needs_proc = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
