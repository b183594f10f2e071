"""MCP benchmark: what a session with one stdio MCP server costs, and what the SDK import costs.

* **session/new**: request → answer, with one stdio server (the test server of ``tests/support/mcp_servers.py``)
  and with none, median of ``--repeats`` fresh daemons (the answer must not wait for the server); each daemon
  first opens one session without servers, which pays the process's first-session imports.
* **exit**: stdin closed → process gone (the server's process group is ended on the way).
* **tools ready**: ``session/new`` sent → the answer of a prompt sent right after it (``echo`` model): the first
  model call waits for the server, so this is spawn + ``initialize`` + ``tools/list`` of the server.
* **SDK import**: ``import mcp.client.session`` in a fresh interpreter (seconds, and the RSS it adds), for this
  interpreter and for any ``--sdk-python`` given (another virtualenv with another ``mcp`` version).

Not a test: it prints a table and never fails on it. Run: ``.venv/bin/python scripts/bench_mcp.py`` (``--quick``:
one repeat).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.mcp_servers import stdio_server  # noqa: E402

IMPORT_PROBE = (
    "import resource, time\n"
    "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
    "t = time.perf_counter()\n"
    "import mcp.client.session, mcp.client.streamable_http, mcp.client.sse\n"
    "took = time.perf_counter() - t\n"
    "from importlib.metadata import version\n"
    "after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
    "print(version('mcp'), took, (after - before) / 1024)\n"
)


def _send(stdin: IO[bytes], frame: dict[str, Any]) -> None:
    stdin.write(json.dumps(frame).encode() + b"\n")
    stdin.flush()


def _answer(stdout: IO[bytes], request_id: int) -> dict[str, Any]:
    while True:
        line = stdout.readline()
        if not line:
            raise RuntimeError("the daemon closed stdout")
        frame = json.loads(line)
        if frame.get("id") == request_id and "method" not in frame:
            return frame


def one_run(servers: list[dict[str, Any]], workdir: Path) -> tuple[float, float, float]:
    env = {**os.environ, "DSH_MODEL": "echo", "DSH_DATA_DIR": str(workdir / "data"), "DSH_MCP_TIMEOUT": "60"}
    process = subprocess.Popen(
        [sys.executable, "-m", "dsh", "acp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=str(workdir),
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        _send(process.stdin, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}})
        _answer(process.stdout, 0)
        warm = {"cwd": str(workdir), "mcpServers": []}
        _send(process.stdin, {"jsonrpc": "2.0", "id": 9, "method": "session/new", "params": warm})
        _answer(process.stdout, 9)
        started = time.perf_counter()
        _send(
            process.stdin,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "session/new",
                "params": {"cwd": str(workdir), "mcpServers": servers},
            },
        )
        session = _answer(process.stdout, 1)["result"]["sessionId"]
        new_latency = time.perf_counter() - started
        prompt = {"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}
        _send(process.stdin, {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": prompt})
        _answer(process.stdout, 2)
        ready = time.perf_counter() - started
    finally:
        stopped = time.perf_counter()
        process.stdin.close()
        process.wait(10)
    return new_latency, ready, time.perf_counter() - stopped


def sdk_import(python: str) -> str:
    out = subprocess.run([python, "-c", IMPORT_PROBE], capture_output=True, text=True, check=True).stdout.split()
    return f"mcp {out[0]}: import {float(out[1]) * 1000:.0f} ms, +{float(out[2]):.0f} MB RSS ({python})"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sdk-python", action="append", default=[])
    args = parser.parse_args()
    repeats = 1 if args.quick else args.repeats
    rows: dict[str, list[tuple[float, float, float]]] = {"no servers": [], "one stdio server": []}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        for _ in range(repeats):
            rows["no servers"].append(one_run([], workdir))
            served = Path(tempfile.mkdtemp(dir=tmp))
            rows["one stdio server"].append(one_run([stdio_server(str(served))], workdir))
    print(
        f"{'':18} {'session/new (ms)':>17} {'first prompt answered (ms)':>27} {'exit (ms)':>10}   median of {repeats}"
    )
    for label, runs in rows.items():
        new = statistics.median(r[0] for r in runs) * 1000
        ready = statistics.median(r[1] for r in runs) * 1000
        gone = statistics.median(r[2] for r in runs) * 1000
        print(f"{label:18} {new:17.1f} {ready:27.0f} {gone:10.0f}")
    for python in [sys.executable, *args.sdk_python]:
        print(sdk_import(python))


if __name__ == "__main__":
    main()
