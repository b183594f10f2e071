"""A step of N ``read_file`` calls on slow storage: wall time with the loop's concurrent read-only calls and with
them switched off (the calls run one after another, as before issue 22).

Slow storage is simulated by a ``workspace/read`` listener that waits ``--latency`` seconds per read (a network
file system, an editor answering ``fs/read_text_file`` over the wire). The model is the scripted one: step 1
makes the N calls, step 2 ends the turn.

    .venv/bin/python scripts/bench_parallel_reads.py [--calls 5] [--latency 0.1] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any


async def _turn(calls: int, latency: float, concurrent: bool, directory: Path) -> float:
    import anyio

    from dsh import events as ev
    from dsh.app import load_core
    from dsh.kernel import App
    from dsh.services.agents import AgentOptions

    steps: list[dict[str, Any]] = [
        {
            "tool_calls": [
                {"name": "read_file", "arguments": {"path": str(directory / f"f{i}.txt")}, "id": f"r{i}"}
                for i in range(calls)
            ]
        },
        {"text": "done"},
    ]
    async with App() as app:
        ctx = app.ctx
        load_core(ctx, scripts={"bench": steps}, context=False)

        async def slow(request: Any, next_: Any) -> Any:
            await anyio.sleep(latency)
            return await next_()

        ctx.on(ev.WORKSPACE_READ, slow)
        tool = ctx.tools.get("read_file")
        assert tool is not None
        tool.meta["concurrency_safe"] = concurrent
        agent = ctx.agent_loop.create("bench", AgentOptions(model="scripted:bench"))
        started = time.perf_counter()
        agent.send([{"type": "text", "text": "read"}])
        with anyio.fail_after(60):
            await agent.when_idle()
        elapsed = time.perf_counter() - started
        results = [e for e in agent.session.events if e.type == "tool/result"]
        assert len(results) == calls and not any(r.data["is_error"] for r in results), results
        return elapsed


def main() -> None:
    import anyio

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--runs", type=int, default=5)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as raw:
        directory = Path(raw)
        os.chdir(directory)  # the session's cwd (a session without one works in the process's)
        for i in range(options.calls):
            (directory / f"f{i}.txt").write_text("".join(f"line {n}\n" for n in range(200)))
        for concurrent in (False, True):
            times = [
                anyio.run(_turn, options.calls, options.latency, concurrent, directory) for _ in range(options.runs)
            ]
            label = "concurrent" if concurrent else "one by one"
            print(
                f"{options.calls} read_file calls, {options.latency * 1000:.0f} ms per read, {label}: "
                f"median {statistics.median(times) * 1000:.0f} ms, min {min(times) * 1000:.0f} ms "
                f"(n={options.runs})"
            )


if __name__ == "__main__":
    main()
