"""How long ``dsh acp`` takes to exit after stdin EOF with many live sessions (issue 42 item 5: within 3 s at 100).

A fresh daemon (echo model, a fresh data directory) gets ``--sessions`` sessions, each with the test suite's stdio
MCP server (``tests.support.mcp_hostile``) unless ``--no-mcp``, each answers one prompt; then its stdin is closed
and the time to its exit is printed, ``--runs`` times (median and max). Not a test: it prints numbers and never
fails on them. The machine is shared: compare medians of runs made in the same minutes.

Run: ``.venv/bin/python scripts/bench_eof.py [--sessions 100] [--runs 5] [--no-mcp]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


async def one_run(sessions: int, with_mcp: bool) -> float:
    with tempfile.TemporaryDirectory(prefix="dsh-bench-eof-") as work:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": work,
            "XDG_CONFIG_HOME": f"{work}/config",
            "DSH_DATA_DIR": f"{work}/data",
            "DSH_MODEL": "echo",
            "PYTHONPATH": str(ROOT / "src"),
            "DSH_LOG_LEVEL": "warning",
        }
        with Path(work, "stderr.log").open("wb") as stderr:  # noqa: ASYNC230 - before anything runs
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "dsh", "acp", stdin=-1, stdout=-1, stderr=stderr, env=env, cwd=work, limit=1 << 24
            )
        assert process.stdin is not None and process.stdout is not None
        stdout = process.stdout
        waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        ids = iter(range(1, 1 << 30))

        async def reader() -> None:
            while line := await stdout.readline():
                message = json.loads(line)
                future = waiting.pop(message.get("id"), None) if "method" not in message else None
                if future is not None:
                    future.set_result(message)

        reading = asyncio.ensure_future(reader())

        async def call(method: str, params: dict[str, Any]) -> Any:
            assert process.stdin is not None
            number = next(ids)
            future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
            waiting[number] = future
            message = {"jsonrpc": "2.0", "id": number, "method": method, "params": params}
            process.stdin.write(json.dumps(message).encode() + b"\n")
            await process.stdin.drain()
            return (await asyncio.wait_for(future, 120))["result"]

        mcp = {
            "name": "bench",
            "command": sys.executable,
            "args": ["-m", "tests.support.mcp_hostile", work],
            "env": [{"name": "PYTHONPATH", "value": str(ROOT)}],
        }
        await call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        opened = [
            (await call("session/new", {"cwd": work, "mcpServers": [mcp] if with_mcp else []}))["sessionId"]
            for _ in range(sessions)
        ]
        prompt = [{"type": "text", "text": "hello"}]
        await asyncio.gather(*(call("session/prompt", {"sessionId": s, "prompt": prompt}) for s in opened))
        started = time.monotonic()
        process.stdin.close()
        await process.wait()
        took = time.monotonic() - started
        reading.cancel()
        return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-mcp", action="store_true")
    args = parser.parse_args()
    times = [asyncio.run(one_run(args.sessions, not args.no_mcp)) for _ in range(args.runs)]
    shape = "without MCP servers" if args.no_mcp else "each with a stdio MCP server"
    print(
        f"EOF → exit with {args.sessions} live sessions {shape}: median {statistics.median(times):.2f} s, "
        f"max {max(times):.2f} s ({', '.join(f'{t:.2f}' for t in times)})"
    )


if __name__ == "__main__":
    main()
