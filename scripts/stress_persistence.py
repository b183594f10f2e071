"""Persistence stress (#10 items 1, 2, 6b): a long-lived session under a disk that fills and frees, hostile deep
data, and many streamed chunks — then the file must load whole, and memory must not have grown per chunk.

What one run does, in one process with the real loop, the ``echo`` model and JSONL persistence:

* ``--turns`` turns, each echoing a ``--words``-word prompt (one ``assistant/chunk`` per word). Before each turn
  the disk is made full with probability ``--full`` (every ``write`` and ``fsync`` of the backend fails with
  ENOSPC, a write after half its bytes, as a real full disk does). A turn on a full disk must end ``error`` with
  code ``SESSION_WRITE_FAILED`` (never ``completed``), and the file must then hold exactly what was durable before
  it; a turn on a free disk must end ``completed``.
* Every ``--deep-every`` turns, an append of data nested 10 000 deep must be refused before it exists (no seq
  used), and a tool call's worth of deep arguments must be rejected by the depth check.
* At the end the disk is freed, one last turn saves everything still queued, and the session is disposed. The
  file is loaded again: seqs contiguous, every turn balanced, the turns' end reasons exactly those observed, every
  chunk on disk, and the live session's memory equal to the file minus the chunks it released.
* Memory: the number of ``assistant/chunk`` events held by the live session after each durable turn (must be 0),
  and the memory retained per turn over the second half of the run (``tracemalloc`` after a full collection),
  which must stay under :data:`PER_CHUNK_LIMIT` bytes per chunk plus :data:`PER_TURN_ALLOWANCE` (measured: about
  24 bytes per chunk with the release, about 580 without it).

Exit status 0 when every check holds, 1 otherwise (with the first failure). ``--short`` is a few-second run that
the test suite runs (``tests/persistence/test_stress_short.py``). Run: ``.venv/bin/python
scripts/stress_persistence.py [--turns 400 --words 500]``.
"""

from __future__ import annotations

import argparse
import errno
import gc
import hashlib
import os
import random
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any, cast

import anyio

from dsh._jsonlimits import exceeds_depth
from dsh.app import load_core
from dsh.kernel import App
from dsh.plugins.persistence import _jsonl
from dsh.plugins.persistence._format import scan
from dsh.services.agents import AgentOptions
from dsh.services.sessions import NotJsonError, SessionEvent

PER_CHUNK_LIMIT = 150
"""Bytes of memory a turn may keep per streamed chunk: its share of the turn's messages (the text itself,
kept in ``user/message``, ``assistant/message`` and the derived history). A kept chunk event costs ~580 bytes."""
PER_TURN_ALLOWANCE = 8192
"""Bytes a turn may keep whatever its length (its other events, the derived messages)."""


class Disk:
    """The backend's two system-call seams, failing with ENOSPC while :attr:`full`."""

    def __init__(self) -> None:
        self.full = False
        self.failures = 0
        self._write_all, self._fsync = _jsonl._write_all, _jsonl._fsync

    def install(self) -> None:
        def write_all(fd: int, data: bytes) -> None:
            if self.full:
                self.failures += 1
                os.write(fd, data[: len(data) // 2])
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            self._write_all(fd, data)

        def fsync(fd: int) -> None:
            if self.full:
                self.failures += 1
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            self._fsync(fd)

        _jsonl._write_all = write_all  # type: ignore[assignment]
        _jsonl._fsync = fsync  # type: ignore[assignment]

    def uninstall(self) -> None:
        _jsonl._write_all, _jsonl._fsync = self._write_all, self._fsync  # type: ignore[assignment]


class Failed(Exception):
    pass


def check(condition: bool, message: str) -> None:
    if not condition:
        raise Failed(message)


def _text(value: str) -> list[Any]:
    return [{"type": "text", "text": value}]


def _deep(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


async def run(turns: int, words: int, full_share: float, deep_every: int, seed: int, data: Path) -> dict[str, Any]:
    rng = random.Random(seed)
    disk = Disk()
    disk.install()
    path = data / "stress.jsonl"
    expected: list[str] = []
    middle = (0, 0)
    try:
        async with App() as app:
            ctx = app.ctx
            load_core(ctx, data_dir=data)
            handle = await ctx.agents.create(
                agent_id="stress", session_id="stress", meta={"cwd": str(data)}, agent_options=AgentOptions("echo")
            )
            agent = handle.agent
            session = agent.session
            tracemalloc.start()
            durable = _digest(path)  # a digest, not the bytes: the check must not hold the file in memory
            for turn in range(1, turns + 1):
                full = rng.random() < full_share and turn < turns
                disk.full = full
                prompt = " ".join(f"t{turn}w{n}" for n in range(words))
                if turn == turns // 2 + 1:
                    gc.collect()
                    middle = (turn, tracemalloc.get_traced_memory()[0])
                agent.send(_text(prompt))
                with anyio.fail_after(60):
                    await agent.when_idle()
                end = session.last("turn/end")
                check(end is not None and end.data["turn"] == turn, f"turn {turn} did not end")
                assert end is not None
                reason = end.data["reason"]
                if full:
                    check(reason.get("kind") == "error", f"turn {turn} on a full disk ended {reason}")
                    check(reason.get("code") == "SESSION_WRITE_FAILED", f"turn {turn}: wrong error {reason}")
                    check(_digest(path) == durable, f"turn {turn}: the file is not what was durable before")
                    expected.append("error")
                else:
                    check(reason == {"kind": "completed"}, f"turn {turn} on a free disk ended {reason}")
                    durable = _digest(path)
                    expected.append("completed")
                held = sum(1 for e in session.events if e.type == "assistant/chunk")
                if not full:
                    check(held == 0, f"turn {turn}: {held} chunks still held in memory after a durable turn")
                if deep_every and turn % deep_every == 0:
                    seq = session.seq
                    try:
                        session.append("context/message", {"content": _text("x"), "source": {"deep": _deep(10_000)}})
                    except NotJsonError:
                        pass
                    else:
                        raise Failed("an append nested 10 000 deep was accepted")
                    check(session.seq == seq, "a refused append used a seq")
                    check(exceeds_depth(_deep(129)), "the depth check missed 129 levels")
            gc.collect()
            per_turn = (tracemalloc.get_traced_memory()[0] - middle[1]) // max(1, turns + 1 - middle[0])
            tracemalloc.stop()
            disk.full = False
            with anyio.fail_after(30):
                await handle.dispose()
            held_events = list(session.events)
    finally:
        disk.uninstall()
    result = scan(path.read_bytes(), str(path))
    check(not result.closers and result.keep_bytes == len(path.read_bytes()), "the file needed repair")
    events = result.events
    check([e.seq for e in events] == list(range(len(events))), "seqs are not contiguous")
    reasons = [e.data["reason"]["kind"] for e in events if e.type == "turn/end"]
    check(reasons == expected, f"turn ends on disk {reasons[:10]}… differ from what was observed {expected[:10]}…")
    on_disk_chunks = sum(1 for e in events if e.type == "assistant/chunk")
    check(on_disk_chunks >= turns * words, f"only {on_disk_chunks} chunks on disk")
    check(_released(events) == held_events, "memory differs from the file minus released chunks")
    limit = PER_CHUNK_LIMIT * words + PER_TURN_ALLOWANCE
    check(per_turn < limit, f"memory grew {per_turn:,} bytes per turn (limit {limit:,}): chunks are being kept")
    return {
        "turns": turns,
        "failed_turns": expected.count("error"),
        "disk_failures": disk.failures,
        "events_on_disk": len(events),
        "chunks_on_disk": on_disk_chunks,
        "events_held": len(held_events),
        "retained_bytes_per_turn": per_turn,
        "retained_bytes_per_chunk": per_turn // max(1, words),
    }


def _digest(path: Path) -> bytes:
    return hashlib.sha256(path.read_bytes()).digest()


def _released(events: list[SessionEvent]) -> list[SessionEvent]:
    closed = {(e.data.get("turn"), e.data.get("step")) for e in events if e.type in ("assistant/message", "step/end")}
    return [e for e in events if e.type != "assistant/chunk" or (e.data.get("turn"), e.data.get("step")) not in closed]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--words", type=int, default=500)
    parser.add_argument("--full", type=float, default=0.2, help="share of turns run on a full disk")
    parser.add_argument("--deep-every", type=int, default=10)
    parser.add_argument("--seed", type=int, default=10)
    parser.add_argument("--data-dir", type=Path, default=None, help="where the session file goes (default: a temp dir)")
    parser.add_argument("--short", action="store_true", help="a few-second run (the test suite's)")
    args = parser.parse_args(argv)
    if args.short:
        args.turns, args.words, args.deep_every = 24, 40, 5
    with tempfile.TemporaryDirectory(prefix="dsh-stress-") as temporary:
        data = args.data_dir or Path(temporary)
        start = time.perf_counter()
        try:
            figures = anyio.run(run, args.turns, args.words, args.full, args.deep_every, args.seed, data)
        except Failed as failure:
            print(f"FAILED: {failure}", file=sys.stderr)
            return 1
    elapsed = time.perf_counter() - start
    for name, value in cast(dict[str, Any], figures).items():
        print(f"{name:>30}: {value:,}")
    print(f"{'seconds':>30}: {elapsed:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
