"""ACP daemon benchmark: dsh against a minimal agent on the official Python ACP SDK, over raw pipes.

Three measurements, each for both agents in the same run (their spawns interleaved so drift hits both alike):

* **initialize**: spawn → ``initialize`` answered, median of ``--spawns`` fresh processes (the initialize
  request is written right after the spawn, so this is start-up plus the first round trip).
* **updates/s**: an N-word echo prompt (``--words``) streams N ``session/update`` notifications;
  rate = N / (time from writing the prompt to reading its answer), median of ``--repeats`` fresh sessions in
  one process, after one small warm-up prompt.
* **CPU per update**: the agent process's user + system CPU time (``/proc/<pid>/stat``) over the same prompt,
  divided by the updates it streamed (dsh persists every chunk to JSONL meanwhile, into a temporary
  ``DSH_DATA_DIR``).
* **cancel**: a ``--cancel-words`` echo prompt; at its first update we write ``session/cancel`` and time
  until the prompt's answer arrives (it should say ``cancelled``), median of ``--cancels`` fresh sessions.

The client is deliberately dumb (subprocess pipes, ``readline``, ``json.loads``; stderr to /dev/null) so the
numbers are the agents', not a client library's. dsh runs as ``python -m dsh acp`` with its default ``echo``
model; the peer is ``scripts/peers/sdk_echo_agent.py``. Not a test: it prints a table and never fails on it.

``--ws`` adds **dsh over WebSocket**: a ``dsh serve`` on 127.0.0.1 (started once, same data directory) reached
through ``dsh bridge`` (spawned like an agent, so the client and every measurement are the same as stdio's; the
bridge's hop is included, a conservative figure). With ``--only dsh --ws`` the ratio column is WebSocket / stdio
(RFC 0038's target: at least 0.5x stdio throughput). Its "CPU per update" is the bridge's, not the server's.

Run: ``.venv/bin/python scripts/bench_acp.py`` (about a minute; ``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
AGENTS: dict[str, list[str]] = {
    "dsh": [sys.executable, "-m", "dsh", "acp"],
    "sdk peer": [sys.executable, str(ROOT / "scripts" / "peers" / "sdk_echo_agent.py")],
}
UPDATE_PREFIX = b'{"jsonrpc":"2.0","method":"session/update"'
"""Both agents write compact JSON in this key order; other lines are parsed (the prefix is only a fast path)."""
CHUNK_MARK = b'"sessionUpdate":"agent_message_chunk"'

BLASTER = r"""
import json, sys
out = sys.stdout.buffer
for line in sys.stdin.buffer:
    msg = json.loads(line)
    method, rid = msg.get("method"), msg.get("id")
    if method == "initialize":
        result = {"protocolVersion": 1}
    elif method == "session/new":
        result = {"sessionId": "s"}
    elif method == "session/prompt":
        words = msg["params"]["prompt"][0]["text"].split(" ")
        out.write(b"".join(
            json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": {
                "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": w + " "}}}},
                separators=(",", ":")).encode() + b"\n" for w in words))
        result = {"stopReason": "end_turn"}
    else:
        continue
    out.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}, separators=(",", ":")).encode() + b"\n")
    out.flush()
"""
"""A fake agent that writes all of a prompt's updates at once: how fast this client can read (its ceiling)."""

EXTRA_ENV: dict[str, str] = {}
"""Added to every agent's environment (main sets ``DSH_DATA_DIR`` to a temporary directory)."""

TARGET_INITIALIZE_S = 0.120
"""Issue #12 item 4: spawn → initialize answered ≤ 120 ms median."""
TARGET_UPDATES_PER_S = 150_000
TARGET_CPU_PER_UPDATE_S = 5e-6
TARGET_CANCEL_S = 0.010
"""Issue #12 item 3: session/cancel → answered ≤ 10 ms (its p99 at 2M words is bench_writer.py's)."""


class AgentProcess:
    """One agent over raw pipes: write request lines, read response lines."""

    def __init__(self, command: list[str]) -> None:
        env = {key: value for key, value in os.environ.items() if not key.startswith("DSH_")}  # dsh defaults
        env.update(EXTRA_ENV)
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT, env=env
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._stdin: IO[bytes] = self.proc.stdin
        self._stdout: IO[bytes] = self.proc.stdout
        self._ids = itertools.count()

    def cpu_seconds(self) -> float:
        """User + system CPU the agent process has used so far (Linux ``/proc``; NaN elsewhere)."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return float("nan")
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def send(self, message: dict[str, Any]) -> None:
        self._stdin.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
        self._stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> int:
        request_id = next(self._ids)
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return request_id

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def read_line(self) -> bytes:
        line = self._stdout.readline()
        if not line:
            raise EOFError(f"the agent closed its stdout (exit code {self.proc.poll()})")
        return line

    def wait_response(self, request_id: int, on_update: Callable[[], None] | None = None) -> dict[str, Any]:
        """Read until the answer to *request_id*; call *on_update* for every ``session/update`` on the way."""
        while True:
            line = self.read_line()
            if line.startswith(UPDATE_PREFIX):
                if on_update is not None:
                    on_update()
                continue
            message: dict[str, Any] = json.loads(line)
            if message.get("method") == "session/update":
                if on_update is not None:
                    on_update()
            elif "method" not in message and message.get("id") == request_id:
                if "error" in message:
                    raise RuntimeError(f"request {request_id} failed: {message['error']}")
                return message

    def initialize(self) -> dict[str, Any]:
        return self.wait_response(self.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}}))

    def new_session(self) -> str:
        response = self.wait_response(self.request("session/new", {"cwd": str(ROOT), "mcpServers": []}))
        return str(response["result"]["sessionId"])

    def close(self) -> None:
        try:
            self._stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._stdout.close()


def prompt_params(session_id: str, words: int) -> dict[str, Any]:
    text = " ".join(f"w{i}" for i in range(words))
    return {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}


@dataclass
class Results:
    initialize: list[float] = field(default_factory=list)
    rates: list[float] = field(default_factory=list)
    cpu_per_update: list[float] = field(default_factory=list)
    updates_seen: list[int] = field(default_factory=list)
    cancels: list[float] = field(default_factory=list)
    cancel_reasons: list[str] = field(default_factory=list)
    after_cancel: list[int] = field(default_factory=list)


def measure_initialize(command: list[str]) -> float:
    agent = AgentProcess(command)
    try:
        agent.initialize()
        return time.perf_counter() - agent.started
    finally:
        agent.close()


def measure_throughput(command: list[str], words: int, repeats: int, results: Results) -> None:
    agent = AgentProcess(command)
    try:
        agent.initialize()
        warm = agent.new_session()
        agent.wait_response(agent.request("session/prompt", prompt_params(warm, 50)))
        for _ in range(repeats):
            session_id = agent.new_session()
            params = prompt_params(session_id, words)
            seen = 0

            def count() -> None:
                nonlocal seen
                seen += 1

            cpu = agent.cpu_seconds()
            start = time.perf_counter()
            response = agent.wait_response(agent.request("session/prompt", params), count)
            elapsed = time.perf_counter() - start
            results.cpu_per_update.append((agent.cpu_seconds() - cpu) / max(seen, 1))
            assert response["result"]["stopReason"] == "end_turn", response
            results.rates.append(words / elapsed)
            results.updates_seen.append(seen)
    finally:
        agent.close()


def measure_cancel(command: list[str], words: int, repeats: int, results: Results) -> None:
    agent = AgentProcess(command)
    try:
        agent.initialize()
        for _ in range(repeats):
            session_id = agent.new_session()
            prompt_id = agent.request("session/prompt", prompt_params(session_id, words))
            while True:  # the first streamed chunk: the turn is running
                line = agent.read_line()
                if line.startswith(UPDATE_PREFIX) and CHUNK_MARK in line:
                    break
            after = 0

            def count() -> None:
                nonlocal after
                after += 1

            start = time.perf_counter()
            agent.notify("session/cancel", {"sessionId": session_id})
            response = agent.wait_response(prompt_id, count)
            results.cancels.append(time.perf_counter() - start)
            results.cancel_reasons.append(str(response["result"]["stopReason"]))
            results.after_cancel.append(after)
    finally:
        agent.close()


def source_dir(tree: Path | str) -> Path:
    """The directory to put first on ``PYTHONPATH`` for the dsh of *tree*: a checkout (its ``src``) or a ``src``
    directory itself, whichever was given. A path that holds neither is an error: a wrong ``--before`` would
    otherwise measure the installed dsh twice, silently."""
    path = Path(tree).resolve()
    for candidate in (path / "src", path):
        if (candidate / "dsh" / "__init__.py").is_file():
            return candidate
    raise SystemExit(f"--before {tree}: neither it nor its src/ holds a dsh package")


def add_before(tree: Path | None) -> None:
    """Add ``dsh before``: the daemon of another source tree (a checkout or its ``src``, first on the path),
    measured in the same run as this one, so before/after figures share the machine's load."""
    if tree is not None:
        AGENTS["dsh before"] = ["env", f"PYTHONPATH={source_dir(tree)}", *AGENTS["dsh"]]


WS_NAME = "dsh over ws"


def start_server() -> tuple[subprocess.Popen[bytes], str]:
    """A ``dsh serve --listen 127.0.0.1:0`` with a throw-away token; its URL once it listens."""
    import re

    env = {key: value for key, value in os.environ.items() if not key.startswith("DSH_")}
    env.update(EXTRA_ENV)
    env["DSH_SERVE_TOKEN"] = EXTRA_ENV["DSH_SERVE_TOKEN"] = "bench-" + os.urandom(8).hex()
    server = subprocess.Popen(
        [sys.executable, "-m", "dsh", "serve", "--listen", "127.0.0.1:0"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT, env=env,
    )  # fmt: skip
    assert server.stderr is not None
    for line in server.stderr:
        found = re.search(rb"listening on (ws://\S+)", line)
        if found:
            return server, found.group(1).decode()
    raise SystemExit("dsh serve did not start")


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--spawns", type=int, default=15)
    parser.add_argument("--words", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cancel-words", type=int, default=200_000)
    parser.add_argument("--cancels", type=int, default=5)
    parser.add_argument("--only", choices=sorted(AGENTS), help="measure one agent only")
    parser.add_argument(
        "--before", type=Path, help="also measure the dsh of this source tree (e.g. a checkout of main): 'dsh before'"
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run: few spawns, small prompts")
    parser.add_argument("--ws", action="store_true", help="also measure dsh serve over WebSocket (through dsh bridge)")
    args = parser.parse_args()
    if args.quick:
        args.spawns, args.words, args.repeats, args.cancel_words, args.cancels = 3, 2_000, 1, 20_000, 2
    add_before(args.before)
    agents = {name: command for name, command in AGENTS.items() if args.only in (None, name)}
    results = {name: Results() for name in agents}
    scratch = tempfile.TemporaryDirectory(prefix="dsh-bench-acp-")
    EXTRA_ENV["DSH_DATA_DIR"] = scratch.name
    server: subprocess.Popen[bytes] | None = None
    if args.ws:
        server, url = start_server()
        ws_agent = {WS_NAME: [sys.executable, "-m", "dsh", "bridge", url]}
        agents = {**ws_agent, **agents}  # first: the ratio column is WebSocket / the next one
        results[WS_NAME] = Results()
    began = time.perf_counter()

    for _ in range(args.spawns):
        for name, command in agents.items():
            results[name].initialize.append(measure_initialize(command))
    for name, command in agents.items():
        measure_throughput(command, args.words, args.repeats, results[name])
    for name, command in agents.items():
        measure_cancel(command, args.cancel_words, args.cancels, results[name])
    ceiling = Results()
    measure_throughput([sys.executable, "-c", BLASTER], args.words, args.repeats, ceiling)
    if server is not None:
        server.terminate()
        server.wait(timeout=30)

    print(
        f"ACP benchmark: {args.spawns} spawns; throughput {args.words} words x {args.repeats}; "
        f"cancel {args.cancel_words} words x {args.cancels}; python {sys.version.split()[0]}; "
        f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}; run took {time.perf_counter() - began:.1f} s"
    )
    print()
    names = list(agents)
    rows: list[tuple[str, list[float], Callable[[float], str], str, Callable[[float], bool]]] = [
        (
            "spawn -> initialize answered (median)",
            [median(results[n].initialize) for n in names],
            lambda v: f"{v * 1000:.0f} ms",
            f"<= {TARGET_INITIALIZE_S * 1000:.0f} ms",
            lambda v: v <= TARGET_INITIALIZE_S,
        ),
        (
            f"session/update throughput, {args.words} words (median)",
            [median(results[n].rates) for n in names],
            lambda v: f"{v:,.0f} /s",
            f">= {TARGET_UPDATES_PER_S:,} /s",
            lambda v: v >= TARGET_UPDATES_PER_S,
        ),
        (
            "agent CPU per streamed update (median)",
            [median(results[n].cpu_per_update) for n in names],
            lambda v: f"{v * 1e6:.2f} µs",
            f"<= {TARGET_CPU_PER_UPDATE_S * 1e6:.0f} µs",
            lambda v: v <= TARGET_CPU_PER_UPDATE_S,
        ),
        (
            "cancel -> prompt answered (median)",
            [median(results[n].cancels) for n in names],
            lambda v: f"{v * 1000:.1f} ms",
            f"<= {TARGET_CANCEL_S * 1000:.0f} ms",
            lambda v: v <= TARGET_CANCEL_S,
        ),
    ]
    header = ["metric", *names]
    if len(names) == 2:
        header.append(f"ratio {names[0]}/{names[1]}")
    header += ["target", f"{names[0]} meets"]
    table: list[list[str]] = [header]
    for label, values, fmt, target, meets in rows:
        row = [label, *(fmt(v) for v in values)]
        if len(names) == 2:
            row.append(f"{values[0] / values[1]:.2f}" if values[1] else "-")
        row += [target, "yes" if meets(values[0]) else "NO"]
        table.append(row)
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for index, row in enumerate(table):
        print(" | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
        if index == 0:
            print("-+-".join("-" * width for width in widths))

    print()
    for name in names:
        r = results[name]
        print(f"{name}:")
        print(
            f"  initialize s: min {min(r.initialize):.3f}  median {median(r.initialize):.3f}  max {max(r.initialize):.3f}"
        )
        print(f"  updates/s per run: {', '.join(f'{v:,.0f}' for v in r.rates)}  (updates seen: {r.updates_seen})")
        print(
            f"  cancel ms per run: {', '.join(f'{v * 1000:.1f}' for v in r.cancels)}  stopReason: {r.cancel_reasons}"
            f"  updates after cancel: {r.after_cancel}"
        )
    print(
        f"client read ceiling (a fake agent writing every update at once): {median(ceiling.rates):,.0f} updates/s; "
        "throughput near it is bounded by this client, not the agent"
    )


if __name__ == "__main__":
    main()
