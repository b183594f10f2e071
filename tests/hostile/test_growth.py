"""A long-lived daemon does not grow (issue #30 item 5): load + close cycles and repeated ``session/list`` calls
cost no memory that stays, measured as the daemon's RSS."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.support.durable import run_daemon

CYCLES = int(os.environ.get("DSH_TEST_LOAD_CYCLES", "40"))
"""The issue's figure is 200 cycles under 32 MiB (``DSH_TEST_LOAD_CYCLES=200``, about 25 s here); a leaking load
costs about 1.3 MiB a cycle with this session, so 40 cycles already fail the same bound."""
PROMPT = "x" * 20_000  # one word: one chunk of 20 KB; a 20-turn session of ~0.8 MB


def read_bytes(pid: int) -> int:
    """What the process read through read() and friends so far (``rchar`` of ``/proc/PID/io``). The daemon is
    not dumpable, so only root may read it: another user skips the test (its RSS bound alone cannot tell a
    re-read from none)."""
    try:
        io = open(f"/proc/{pid}/io", encoding="ascii")  # noqa: SIM115 - closed by the with below
    except PermissionError:
        pytest.skip("/proc/PID/io of a non-dumpable daemon is readable by root only")
    with io:
        for line in io:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    raise AssertionError("no rchar")


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


async def test_load_and_close_cycles_do_not_grow_the_daemon(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with run_daemon(tmp_path, data) as daemon:
        session = await daemon.start()
        for turn in range(20):
            await daemon.prompt(session, f"{turn} {PROMPT}")
        await daemon.close_session(session)
        pid = daemon.process.pid
        for _ in range(20):  # warm-up: caches, arenas, the first collections
            await daemon.load(session)
            await daemon.close_session(session)
        before = rss(pid)
        started = time.monotonic()
        loading = closing = 0.0
        for _ in range(CYCLES):
            t0 = time.monotonic()
            await daemon.load(session)
            t1 = time.monotonic()
            await daemon.close_session(session)
            loading += t1 - t0
            closing += time.monotonic() - t1
            daemon.client.wire.clear()  # the test's own record of the replays is not what is measured
        after = rss(pid)
        print(
            f"{CYCLES} cycles: {time.monotonic() - started:.1f} s (load {loading:.1f}, close {closing:.1f}), RSS {before >> 20} -> {after >> 20} MiB"
        )
    assert after - before < 32 * 1024 * 1024, (before >> 20, after >> 20)


async def test_listing_does_not_hold_or_reread_whole_sessions(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with run_daemon(tmp_path, data) as daemon:
        session = await daemon.start()
        await daemon.prompt(session, "Title words here " + "y" * 1_000_000)  # a large first message
        pid = daemon.process.pid
        listed = await daemon.list()
        assert [s.session_id for s in listed.sessions] == [session]
        assert (listed.sessions[0].title or "").startswith("Title words here")
        before, read_before = rss(pid), read_bytes(pid)
        started = time.monotonic()
        for _ in range(300):
            await daemon.list()
        daemon.client.wire.clear()
        after, read = rss(pid), read_bytes(pid) - read_before
        print(f"300 lists: {time.monotonic() - started:.1f} s, RSS {before >> 20} -> {after >> 20} MiB, read {read} B")
    assert after - before < 64 * 1024 * 1024, (before >> 20, after >> 20)
    assert read < 300 * 64 * 1024, read  # a stat per file and list, not the 1 MB message each time
