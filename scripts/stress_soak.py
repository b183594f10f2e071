"""A long-lived daemon under a mixed load does not grow (issue #30): prints the daemon's RSS slope.

The real ``python -m dsh acp`` is driven over raw pipes for ``--seconds``: sessions with an MCP server
(``tests.support.mcp_hostile``, raw JSON-RPC) in bypass mode, and a loop of operations — a prompt whose model
call runs ``run_command``, one that calls the MCP server's ``echo`` tool, a plain text prompt, a prompt that hangs
until it is cancelled (``session/cancel``), ``session/list``, and every few rounds the session closed and a fresh one
opened, then an older one loaded (replay) and closed. The model is this file's ``soak`` adapter (loaded into the
daemon with ``DSH_PLUGINS=stress_soak:soak_plugin``): it decides from the last message, so it never runs out.

Every answer is checked (stop reasons, no JSON-RPC error); the daemon's RSS is sampled every second, and the
slope (MiB per minute) is fitted by least squares over the samples after the warm-up (the first fifth of the
run, at least 10 s when there is time). Target (issue #30): under 1 MiB per minute after warm-up over 10 minutes.

``--sessions N`` drives N sessions concurrently, each its own loop of the operations above (the MCP server on
every ``--mcp-every``-th session: 1 in 10 by default when N > 1); the summary gives RSS at start, after warm-up,
at the end, the peak and the slope (issue #42: 100 sessions over 20 minutes, under 1 MiB per minute).

Run: ``.venv/bin/python scripts/stress_soak.py --seconds 600``, ``--sessions 100 --seconds 1200``; ``--short``
is the test suite's mode (a few seconds: every operation at least once, no slope claimed). Exit status 1 when a
check fails.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent


# -- the model, inside the daemon ------------------------------------------------------------------------------


def _is_session_note(message: dict[str, Any]) -> bool:
    from dsh.context import SESSION_NOTE_OPENING

    first = next((b for b in message.get("content", []) if b.get("type") == "text"), None)
    return first is not None and first.get("text", "").startswith(SESSION_NOTE_OPENING)


def soak_plugin(ctx: Any, config: Any = None) -> None:
    """Register the ``soak`` model: ``tool`` → ``run_command``; ``mcp`` → the MCP echo tool; ``hang`` → nothing
    until cancelled; a tool result → ``done``; anything else → ``ok``."""

    async def adapter(request: Any) -> AsyncIterator[dict[str, Any]]:
        # The last message, passing over the session's notes (mode, date: RFC 0032), which follow the prompt.
        told = [m for m in request.messages if not _is_session_note(m)]
        last = told[-1] if told else {"content": []}
        blocks = last.get("content", [])
        text = " ".join(b.get("text", "") for b in blocks if b.get("type") == "text").strip()
        trailing: list[Any] = []  # the user messages since the model last spoke (a context message may follow)
        for message in reversed(request.messages):
            if message.get("role") != "user":
                break
            trailing.append(message)
        asked = " ".join(b.get("text", "") for m in trailing for b in m.get("content", []) if isinstance(b, dict))
        called = False
        if any(b.get("type") == "tool-result" for b in blocks):
            yield {"type": "text-delta", "text": "done"}
        elif text.startswith("tool"):
            arguments = json.dumps({"command": "echo soak $PPID"})
            called = True
            yield {
                "type": "tool-call-delta",
                "id": f"c{time.monotonic_ns()}",
                "name": "run_command",
                "arguments_delta": arguments,
            }
        elif text.startswith("mcp"):
            arguments = json.dumps({"text": "soak"})
            called = True
            yield {
                "type": "tool-call-delta",
                "id": f"m{time.monotonic_ns()}",
                "name": "mcp__soak__echo",
                "arguments_delta": arguments,
            }
        elif "stats please" in asked and not any(
            b.get("type") == "tool-result" for b in blocks
        ):  # what the daemon holds after a full collection (the short mode's bound;
            # the end of the text: a session's first message may carry context blocks before the prompt's words)
            import gc

            gc.collect()
            yield {"type": "text-delta", "text": f"objects={len(gc.get_objects())} blocks={sys.getallocatedblocks()}"}
        elif text.startswith("hang"):
            if request.signal is not None:
                await request.signal.wait()
            yield {"type": "finish", "reason": {"kind": "aborted"}}
            return
        else:
            yield {"type": "text-delta", "text": "ok " * 20}
        yield {"type": "usage", "usage": {"input_tokens": 100, "output_tokens": 10}}
        yield {"type": "finish", "reason": {"kind": "tool-calls" if called else "stop"}}

    ctx.llm.register_adapter(["soak"], adapter)
    profile = os.environ.get("DSH_SOAK_PROFILE")
    if profile:
        ctx.spawn(_profile, profile, name="soak-profile")


async def _profile(path: str) -> None:
    """Every 10 s, one line appended to *path* (:func:`_sample`). For finding what grows; off unless asked."""
    import anyio

    while True:
        await anyio.sleep(10)
        _sample(path)


def _sample(path: str) -> None:
    """The daemon's RSS, its Python allocator's blocks in use, objects the collector tracks, threads, open
    descriptors, collections per generation and the collector's counters."""
    import gc
    import threading

    with open("/proc/self/status", encoding="ascii") as status:
        fields = dict(line.split(":", 1) for line in status if ":" in line)
    line = (
        f"{time.monotonic():.0f} rss {fields['VmRSS'].strip()} anon {fields.get('RssAnon', '?').strip()} "
        f"blocks {sys.getallocatedblocks()} objects {len(gc.get_objects())} threads {threading.active_count()} "
        f"fds {len(os.listdir('/proc/self/fd'))} gc {[g['collections'] for g in gc.get_stats()]} "
        f"count {gc.get_count()}"
    )
    with open(path, "a", encoding="utf-8") as out:
        out.write(line + "\n")


# -- the client ------------------------------------------------------------------------------------------------


class Failure(Exception):
    pass


@dataclass
class Client:
    process: asyncio.subprocess.Process
    next_id: int = 0
    waiting: dict[int, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)
    updates: int = 0
    said: dict[str, str] = field(default_factory=dict)
    """The agent's message text so far, for the sessions in :attr:`probes` (the ``stats`` answers)."""
    probes: set[str] = field(default_factory=set)

    async def reader(self) -> None:
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            message = json.loads(line)
            if "method" in message:
                if "id" in message:  # a request of the daemon (none expected in bypass mode): refuse it
                    await self.send({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "no"}})
                else:
                    self.updates += 1
                    update = message.get("params", {}).get("update", {})
                    session_id = message["params"]["sessionId"]
                    if update.get("sessionUpdate") == "agent_message_chunk" and session_id in self.probes:
                        self.said[session_id] = self.said.get(session_id, "") + update.get("content", {}).get(
                            "text", ""
                        )
                continue
            future = self.waiting.pop(message.get("id"), None)
            if future is not None and not future.done():
                future.set_result(message)
        for future in self.waiting.values():
            if not future.done():
                future.set_exception(Failure("the daemon closed its stdout"))

    async def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        await self.process.stdin.drain()

    def start(self, method: str, params: dict[str, Any]) -> asyncio.Future[dict[str, Any]]:
        self.next_id += 1
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.waiting[self.next_id] = future
        assert self.process.stdin is not None
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.process.stdin.write(json.dumps(message).encode() + b"\n")  # drained by the next send or call
        return future

    async def call(self, method: str, params: dict[str, Any], deadline: float = 60.0) -> Any:
        answer = await asyncio.wait_for(self.start(method, params), deadline)
        if "error" in answer:
            raise Failure(f"{method} answered an error: {json.dumps(answer['error'])[:300]}")
        return answer["result"]


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def slope(samples: list[tuple[float, int]]) -> float:
    """MiB per minute, least squares over *samples* ``(seconds, bytes)``."""
    if len(samples) < 2:
        return 0.0
    n = len(samples)
    mean_t = sum(t for t, _ in samples) / n
    mean_r = sum(r for _, r in samples) / n
    num = sum((t - mean_t) * (r - mean_r) for t, r in samples)
    den = sum((t - mean_t) ** 2 for t, _ in samples) or 1.0
    return num / den * 60 / (1 << 20)


@dataclass
class Report:
    operations: dict[str, int] = field(default_factory=dict)
    samples: list[tuple[float, int]] = field(default_factory=list)
    warm_up: float = 0.0
    held: list[tuple[int, int, int]] = field(default_factory=list)
    """``(operations so far, live objects, allocated blocks)`` after a full collection, when measured."""

    def count(self, name: str) -> None:
        self.operations[name] = self.operations.get(name, 0) + 1


async def soak(seconds: float, workdir: Path, sessions: int = 1, mcp_every: int = 1, measure: bool = False) -> Report:
    report = Report(warm_up=min(max(seconds / 5, 10.0), seconds / 2))
    data = workdir / "data"
    project = workdir / "project"
    project.mkdir()
    served = workdir / "mcp"
    served.mkdir()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(workdir),
        "XDG_CONFIG_HOME": str(workdir / "config"),
        "LANG": "C.UTF-8",
        "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT / "src"), str(ROOT)]),
        "DSH_DATA_DIR": str(data),
        "DSH_MODEL": "soak",
        "DSH_PLUGINS": "stress_soak:soak_plugin",
        "DSH_LOG_LEVEL": "warning",
        "DSH_MCP_TIMEOUT": "30",
    }
    for name in ("DSH_SOAK_PROFILE", "DSH_SOAK_PROFILE_COLLECT", "MALLOC_ARENA_MAX"):
        if os.environ.get(name):
            env[name] = os.environ[name]
    mcp = {
        "name": "soak",
        "command": sys.executable,
        "args": ["-m", "tests.support.mcp_hostile", str(served)],
        "env": [{"name": "PYTHONPATH", "value": str(ROOT)}],
    }
    stderr = (workdir / "stderr.log").open("wb")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "dsh",
        "acp",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=stderr,
        env=env,
        cwd=str(project),
        limit=64 << 20,
    )
    client = Client(process)
    reading = asyncio.ensure_future(client.reader())
    try:
        await client.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})

        async def open_session(with_mcp: bool = True) -> str:
            result = await client.call("session/new", {"cwd": str(project), "mcpServers": [mcp] if with_mcp else []})
            session = str(result["sessionId"])
            await client.call("session/set_mode", {"sessionId": session, "modeId": "bypass"})
            report.count("new")
            return session

        async def prompt(session: str, text: str, expect: str = "end_turn") -> None:
            result = await client.call(
                "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": text}]}
            )
            if result.get("stopReason") != expect:
                raise Failure(f"prompt {text!r} stopped {result.get('stopReason')!r}, not {expect!r}")
            report.count(text.split()[0])

        async def cancelled(session: str) -> None:
            pending = client.start(
                "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "hang"}]}
            )
            await asyncio.sleep(0.02)  # the turn starts; the cancel covers it whether it did or not
            await client.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}})
            answer = await asyncio.wait_for(pending, 30)
            if answer.get("result", {}).get("stopReason") != "cancelled":
                raise Failure(f"a cancelled prompt answered {json.dumps(answer)[:300]}")
            report.count("cancel")

        started = time.monotonic()
        stop = asyncio.Event()

        async def sampler() -> None:
            while not stop.is_set():
                report.samples.append((time.monotonic() - started, rss(process.pid)))
                try:
                    await asyncio.wait_for(stop.wait(), 1.0)
                except TimeoutError:
                    pass

        async def worker(index: int) -> None:
            with_mcp = index % mcp_every == 0
            session = await open_session(with_mcp)
            old: list[str] = []
            rounds = 0
            while True:
                if time.monotonic() - started >= seconds and rounds >= 10:  # every operation at least once
                    break
                rounds += 1
                await prompt(session, "tool please")
                if with_mcp:
                    await prompt(session, "mcp please")
                await prompt(session, "text please")
                await cancelled(session)
                if rounds % 3 == 0:
                    await client.call("session/list", {}, deadline=120.0)
                    report.count("list")
                if rounds % 5 == 0:
                    await client.call("session/close", {"sessionId": session})
                    report.count("close")
                    old.append(session)
                    session = await open_session(with_mcp)
                    if len(old) > 1:
                        again = old.pop(0)
                        await client.call("session/load", {"sessionId": again, "cwd": str(project), "mcpServers": []})
                        report.count("load")
                        await client.call("session/close", {"sessionId": again})
                        report.count("close")

        async def held() -> None:
            """The daemon's live objects and blocks after a full collection (the soak's model measures them)."""
            probe = await open_session(False)
            client.probes.add(probe)
            await prompt(probe, "stats please")
            fields = dict(part.split("=") for part in client.said[probe].split())
            done = sum(report.operations.values())
            report.held.append((done, int(fields["objects"]), int(fields["blocks"])))
            await client.call("session/close", {"sessionId": probe})

        async def measuring() -> None:
            await asyncio.sleep(report.warm_up)
            await held()

        sampling = asyncio.ensure_future(sampler())
        measured = asyncio.ensure_future(measuring()) if measure else None
        try:
            await asyncio.gather(*(worker(index) for index in range(sessions)))
            if measured is not None:
                await measured
                await held()
        finally:
            stop.set()
            await sampling
        report.samples.append((time.monotonic() - started, rss(process.pid)))
    finally:
        if process.stdin is not None:
            process.stdin.close()
        try:
            code = await asyncio.wait_for(process.wait(), 10)
        except TimeoutError:
            process.kill()
            code = await process.wait()
        reading.cancel()
        stderr.close()
    if code != 0:
        raise Failure(f"the daemon exited {code}: {(workdir / 'stderr.log').read_text(errors='replace')[-2000:]}")
    errors = [
        line
        for line in (workdir / "stderr.log").read_text(errors="replace").splitlines()
        if '"level": "error"' in line or "Traceback" in line
    ]
    if errors:
        raise Failure("the daemon logged errors:\n" + "\n".join(e[:500] for e in errors[:5]))
    return report


def growth_per_operation(report: Report) -> tuple[float, float]:
    """Live objects and allocated blocks gained per operation between the two measurements (after warm-up, at
    the end), each after a full collection."""
    (ops_a, objects_a, blocks_a), (ops_b, objects_b, blocks_b) = report.held[0], report.held[-1]
    done = max(ops_b - ops_a, 1)
    return (objects_b - objects_a) / done, (blocks_b - blocks_a) / done


def run(seconds: float, sessions: int = 1, mcp_every: int = 1, measure: bool = False) -> tuple[Report, str]:
    with tempfile.TemporaryDirectory(prefix="dsh-soak-") as workdir:
        report = asyncio.run(soak(seconds, Path(workdir), sessions, mcp_every, measure))
    warm = [(t, r) for t, r in report.samples if t >= report.warm_up]
    first, last = report.samples[0][1] >> 20, report.samples[-1][1] >> 20
    peak = max(r for _, r in report.samples) >> 20
    warmed = warm[0][1] >> 20 if warm else first
    summary = (
        f"{seconds:.0f} s, {sessions} concurrent sessions: {sum(report.operations.values())} operations "
        f"{report.operations}; RSS {first} -> {warmed} (after warm-up) -> {last} MiB, peak {peak} MiB; "
        f"slope after {report.warm_up:.0f} s warm-up: {slope(warm):+.2f} MiB/min ({len(warm)} samples)"
    )
    if len(report.held) >= 2:
        objects, blocks = growth_per_operation(report)
        summary += f"; after warm-up, per operation: {objects:+.2f} live objects, {blocks:+.1f} allocated blocks"
    return report, summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--short", action="store_true", help="a few seconds: every operation once, no slope claim")
    parser.add_argument("--sessions", type=int, default=1, help="sessions driven concurrently (default 1)")
    parser.add_argument(
        "--mcp-every",
        type=int,
        default=0,
        help="every Nth session has the MCP server (default: all of 1, 1 in 10 of more)",
    )
    parser.add_argument("--measure", action="store_true", help="live objects and blocks per operation after warm-up")
    args = parser.parse_args()
    mcp_every = args.mcp_every or (1 if args.sessions == 1 else 10)
    try:
        _, summary = run(3.0 if args.short else args.seconds, args.sessions, mcp_every, args.measure)
    except Failure as exc:
        sys.stdout.write(f"FAILED: {exc}\n")
        return 1
    sys.stdout.write(summary + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
