"""Writer and start-up benchmark: dsh against the SDK peer agent (``scripts/peers/``), over raw pipes.

The figures of issue #12 items 3 and 4 (and #10 items 5d and 6a), each measured for both agents in one run:

* **init**: spawn → ``initialize`` answered, median of ``--spawns`` fresh processes, spawns interleaved.
* **first**: a model's first byte → the editor's first update. For dsh the model is a loopback
  OpenAI-compatible server in this process (``DSH_MODEL=openai:…``) that records when it writes the first
  delta, so the figure is exactly "first byte out of the model" → "first update read by the client". The SDK
  peer has no model, so its figure is prompt written → first update (an upper bound of the same thing; dsh's
  prompt → first update with its echo model is printed too, for the like-for-like comparison).
* **cancel**: a ``--cancel-words`` echo reply (2M words by default) streams; after ``--cancel-after`` updates
  the client writes ``session/cancel`` and times the prompt's answer; median, p99 and max over ``--cancels``
  fresh processes. dsh runs with persistence (the default) and without (the JSONL plugin left out).
* **stall**: the client reads 1,000 updates of a 2M-word reply, then stops reading for ``--stall`` seconds;
  meanwhile it samples the agent's RSS and sends ``session/cancel``; then it reads again. Printed: RSS growth
  during the stall, whether the answer was ``cancelled``, whether every chunk arrived in order.
* **sigterm** / **eof**: same stall; the client sends SIGTERM (or closes the agent's stdin) without reading;
  time until the process has exited.

``--src DIR`` runs dsh from another source tree (``PYTHONPATH``); ``--before DIR`` adds a "dsh before" agent
run from DIR (e.g. ``git archive main src | tar -x -C DIR``), so before and after are measured in one run,
interleaved, under the same load.
The client is deliberately dumb (``subprocess``, ``readline``) so the figures are the agents'. Not a test: it
prints numbers and never fails on them. The machine is shared: run it more than once and compare medians.

Run: ``.venv/bin/python scripts/bench_writer.py`` (a few minutes; ``--quick`` for a smoke run; ``--only``
to pick measurements).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_acp import AGENTS, CHUNK_MARK, ROOT, UPDATE_PREFIX, AgentProcess, prompt_params, source_dir

NO_PERSISTENCE = [
    sys.executable,
    "-c",
    "import sys, dsh.app as a; core = a.load_core; "
    "a.load_core = lambda ctx, **kw: core(ctx, **{**kw, 'data_dir': None}); "
    "sys.argv = ['dsh', 'acp']; from dsh._entry import main; main()",
]
"""dsh without the JSONL persistence plugin (a benchmark-only launcher: the daemon always persists)."""

Spec = tuple[list[str], dict[str, str] | None]
"""An agent: its command line and the environment it runs with (None: ours, minus ``DSH_*``)."""

MEASUREMENTS = ("init", "first", "cancel", "stall", "sigterm", "eof")


class Agent(AgentProcess):
    """An agent process with an environment of our choosing (``--src``, a model, a data directory)."""

    def __init__(self, command: list[str], env: dict[str, str] | None = None) -> None:
        base = {key: value for key, value in os.environ.items() if not key.startswith("DSH_")}
        base.update(env or {})
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT, env=base
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._stdin = self.proc.stdin
        self._stdout = self.proc.stdout
        import itertools

        self._ids = itertools.count()

    def rss_kib(self) -> int:
        try:
            with open(f"/proc/{self.proc.pid}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return -1

    def read_chunks(self, count: int, texts: list[str] | None = None) -> None:
        seen = 0
        while seen < count:
            line = self.read_line()
            if line.startswith(UPDATE_PREFIX) and CHUNK_MARK in line:
                seen += 1
                if texts is not None:
                    texts.append(json.loads(line)["params"]["update"]["content"]["text"])


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)] if ordered else float("nan")


def ms(value: float) -> str:
    return f"{value * 1000:.2f} ms"


# -- a loopback OpenAI-compatible model that records when its first byte goes out -----------------------------


class LoopbackModel:
    """Answers every chat request with a short streamed reply; ``first_byte`` holds, per request, the
    ``perf_counter`` at which the first content delta was written to the socket."""

    def __init__(self, idle: float = 0.02) -> None:
        self.first_byte: list[float] = []
        self._idle = idle
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}/v1"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            conn, _ = self._listener.accept()
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buffer = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buffer += data
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(buffer) < length:
                    buffer += conn.recv(65536)
                buffer = buffer[length:]
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                )
                time.sleep(self._idle)  # the daemon is idle, waiting for the model

                def event(payload: dict[str, Any]) -> bytes:
                    body = f"data: {json.dumps(payload)}\n\n".encode()
                    return f"{len(body):x}\r\n".encode() + body + b"\r\n"

                def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
                    return {
                        "id": "c",
                        "object": "chat.completion.chunk",
                        "created": 0,
                        "model": "m",
                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                    }

                first = event(chunk({"role": "assistant", "content": "hello"}))
                self.first_byte.append(time.perf_counter())
                conn.sendall(first)
                time.sleep(0.005)
                rest = event(chunk({"content": " world"})) + event(chunk({}, "stop"))
                done = b"data: [DONE]\n\n"
                conn.sendall(rest + f"{len(done):x}\r\n".encode() + done + b"\r\n0\r\n\r\n")


# -- measurements ---------------------------------------------------------------------------------------------


def measure_init(commands: dict[str, Spec], spawns: int) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(spawns):
        for name, (command, env) in commands.items():
            agent = Agent(command, env)
            try:
                agent.initialize()
                results[name].append(time.perf_counter() - agent.started)
            finally:
                agent.close()
    return results


def first_update(agent: Agent, session_id: str, words: int) -> float:
    start = time.perf_counter()
    prompt_id = agent.request("session/prompt", prompt_params(session_id, words))
    agent.read_chunks(1)
    elapsed = time.perf_counter() - start
    agent.wait_response(prompt_id)
    return elapsed


def measure_first(commands: dict[str, Spec], repeats: int) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {}
    for name, (command, env) in commands.items():
        agent = Agent(command, env)
        try:
            agent.initialize()
            session_id = agent.new_session()
            first_update(agent, session_id, 50)  # warm-up
            results[f"{name}: prompt -> first update (echo)"] = [
                first_update(agent, session_id, 10) for _ in range(repeats)
            ]
        finally:
            agent.close()
    for name, (dsh_command, env) in commands.items():
        if not name.startswith("dsh"):
            continue
        model = LoopbackModel()
        model_env = {**(env or {}), "DSH_MODEL": "openai:bench", "OPENAI_BASE_URL": model.url, "OPENAI_API_KEY": "x"}
        agent = Agent(dsh_command, model_env)
        latencies: list[float] = []
        try:
            agent.initialize()
            session_id = agent.new_session()
            for index in range(repeats + 1):
                prompt_id = agent.request("session/prompt", prompt_params(session_id, 3))
                agent.read_chunks(1)
                seen = time.perf_counter()
                agent.wait_response(prompt_id)
                if index:  # the first one warms up the HTTP client
                    latencies.append(seen - model.first_byte[-1])
        finally:
            agent.close()
        results[f"{name}: model first byte -> first update (loopback model)"] = latencies
    return results


def measure_cancel(
    commands: dict[str, Spec], words: int, after: int, repeats: int
) -> dict[str, tuple[list[float], list[str]]]:
    results: dict[str, tuple[list[float], list[str]]] = {name: ([], []) for name in commands}
    params_cache: dict[str, Any] = {}
    for _ in range(repeats):
        for name, (command, env) in commands.items():
            agent = Agent(command, env)
            try:
                agent.initialize()
                session_id = agent.new_session()
                params = params_cache.setdefault("p", prompt_params("SESSION", words))
                params = {**params, "sessionId": session_id}
                prompt_id = agent.request("session/prompt", params)
                agent.read_chunks(after)
                start = time.perf_counter()
                agent.notify("session/cancel", {"sessionId": session_id})
                response = agent.wait_response(prompt_id)
                results[name][0].append(time.perf_counter() - start)
                results[name][1].append(str(response["result"]["stopReason"]))
            finally:
                agent.proc.kill()
                agent.close()
    return results


def stalled(agent: Agent, words: int) -> tuple[str, int]:
    """Start a long reply, read 1,000 chunks, then stop reading; returns (session id, prompt id)."""
    agent.initialize()
    session_id = agent.new_session()
    prompt_id = agent.request("session/prompt", prompt_params(session_id, words))
    agent.read_chunks(1000)
    return session_id, prompt_id


def measure_stall(name: str, command: list[str], env: dict[str, str] | None, words: int, stall: float) -> str:
    agent = Agent(command, env)
    try:
        session_id, prompt_id = stalled(agent, words)
        before = agent.rss_kib()
        samples: list[int] = []
        began = time.perf_counter()
        cancelled = False
        while time.perf_counter() - began < stall:
            samples.append(agent.rss_kib())
            if not cancelled and time.perf_counter() - began > stall / 2:
                agent.notify("session/cancel", {"sessionId": session_id})
                cancelled = True
            time.sleep(0.05)
        resumed = time.perf_counter()
        texts: list[str] = []
        answer: dict[str, Any] | None = None
        while answer is None:
            line = agent.read_line()
            if line.startswith(UPDATE_PREFIX):
                if CHUNK_MARK in line:
                    texts.append(json.loads(line)["params"]["update"]["content"]["text"])
                continue
            message = json.loads(line)
            if message.get("id") == prompt_id:
                answer = message
        answered = time.perf_counter() - resumed
        in_order = all(text.strip() == f"w{1000 + index}" for index, text in enumerate(texts))
        reason = answer.get("result", {}).get("stopReason") if "result" in answer else answer.get("error")
        return (
            f"{name}: RSS before stall {before / 1024:.1f} MiB, max during {max(samples) / 1024:.1f} MiB "
            f"(+{(max(samples) - before) / 1024:.1f}); answer {reason!r} {answered * 1000:.1f} ms after reading "
            f"resumed; {len(texts)} chunks after the first 1,000, in order: {in_order}"
        )
    finally:
        agent.proc.kill()
        agent.close()


def measure_exit(name: str, command: list[str], env: dict[str, str] | None, words: int, how: str) -> str:
    agent = Agent(command, env)
    try:
        stalled(agent, words)
        time.sleep(0.5)  # the pipe fills up; the agent is now blocked on a client that does not read
        start = time.perf_counter()
        if how == "sigterm":
            agent.proc.send_signal(signal.SIGTERM)
        else:
            agent._stdin.close()
        try:
            code = agent.proc.wait(timeout=60)
            return (
                f"{name}: {how} while the client does not read -> exit {code} after {ms(time.perf_counter() - start)}"
            )
        except subprocess.TimeoutExpired:
            return f"{name}: {how} while the client does not read -> still running after 60 s"
    finally:
        agent.proc.kill()
        agent.proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--only", nargs="*", choices=MEASUREMENTS, default=list(MEASUREMENTS))
    parser.add_argument("--src", help="run dsh from this source tree (PYTHONPATH)")
    parser.add_argument("--before", help="also run 'dsh before' from this source tree (a copy of main, say)")
    parser.add_argument("--spawns", type=int, default=15)
    parser.add_argument("--firsts", type=int, default=30)
    parser.add_argument("--cancel-words", type=int, default=2_000_000)
    parser.add_argument("--cancel-after", type=int, default=2_000)
    parser.add_argument("--cancels", type=int, default=20)
    parser.add_argument("--stall", type=float, default=2.0)
    parser.add_argument("--no-peer", action="store_true", help="dsh only")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.spawns, args.firsts, args.cancel_words, args.cancels = 3, 5, 200_000, 3
    data = Path(os.environ.get("TMPDIR", "/tmp")) / f"dsh-bench-writer-{os.getpid()}"
    base = {"DSH_DATA_DIR": str(data), "XDG_CONFIG_HOME": str(data / "config")}
    env = {**base, "PYTHONPATH": str(source_dir(args.src))} if args.src else dict(base)
    commands: dict[str, Spec] = {"dsh": (AGENTS["dsh"], env)}
    if args.before:
        commands["dsh before"] = (AGENTS["dsh"], {**base, "PYTHONPATH": str(source_dir(args.before))})
    if not args.no_peer:
        commands["sdk peer"] = (AGENTS["sdk peer"], None)
    print(
        f"bench_writer: python {sys.version.split()[0]}; {os.cpu_count()} CPUs; load average "
        f"{os.getloadavg()[0]:.2f}; dsh from {args.src or 'the installed tree'}"
        + (f"; 'dsh before' from {args.before}" if args.before else "")
    )
    if "init" in args.only:
        for name, values in measure_init(commands, args.spawns).items():
            print(
                f"init  {name}: spawn -> initialize answered median {ms(statistics.median(values))} "
                f"(min {ms(min(values))}, max {ms(max(values))}, n={len(values)})"
            )
    if "first" in args.only:
        for label, values in measure_first(commands, args.firsts).items():
            print(
                f"first {label}: median {ms(statistics.median(values))}, p90 {ms(percentile(values, 90))} "
                f"(n={len(values)})"
            )
    if "cancel" in args.only:
        cancel_commands: dict[str, Spec] = {}
        for name, (command, env_) in commands.items():
            cancel_commands[name] = (command, env_)
            if name.startswith("dsh"):
                cancel_commands[f"{name} (no persistence)"] = (NO_PERSISTENCE, env_)
        results = measure_cancel(cancel_commands, args.cancel_words, args.cancel_after, args.cancels)
        for name, (values, reasons) in results.items():
            print(
                f"cancel {name}: {args.cancel_words:,}-word reply, cancel after {args.cancel_after:,} updates -> "
                f"answer median {ms(statistics.median(values))}, p99 {ms(percentile(values, 99))}, max "
                f"{ms(max(values))} (n={len(values)}; stopReasons {sorted(set(reasons))})"
            )
    if "stall" in args.only:
        for name, (command, env_) in commands.items():
            print("stall " + measure_stall(name, command, env_, args.cancel_words, args.stall))
    for how in ("sigterm", "eof"):
        if how in args.only:
            for name, (command, env_) in commands.items():
                print(f"{how} " + measure_exit(name, command, env_, args.cancel_words, how))


if __name__ == "__main__":
    main()
