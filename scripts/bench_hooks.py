"""What hooks (RFC 0035, :mod:`dsh.hooks`) cost per tool call: ``ctx.tools.execute`` of ``read_file`` through the
whole pipeline with the policy loaded, (a) the hooks plugin off, (b) on with no hook configured (what every user
without hooks pays), (c) one no-op ``PreToolUse`` hook (``true``) run under the sandbox at the approved level,
the no-hook check alone, (d) the same hook unconfined (``sandbox: {approved: off}``): process start dominates. Prints medians ((a) and (b):
the best of three interleaved runs); never fails.

    .venv/bin/python scripts/bench_hooks.py [N]
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

from dsh.app import load_core
from dsh.hooks import HooksConfig
from dsh.kernel import App
from dsh.policy import PolicyConfig
from dsh.sandbox import SandboxConfig
from dsh.services.tools import ToolExecution

sys.path.insert(0, str(Path(__file__).parent))
from bench_policy import _Agent, _Header, _Session  # the same stand-in agent as the policy's benchmark


async def _calls(hooks: HooksConfig, sandbox: SandboxConfig, n: int, cwd: str) -> float:
    async with App() as app:
        load_core(app.ctx, context=False, policy=PolicyConfig(), hooks=hooks, sandbox=sandbox)
        agent = _Agent(_Session(_Header(cwd)))
        times = []
        for index in range(n):
            execution = ToolExecution(f"c{index}", "read_file", {"path": "a.txt"}, agent)  # type: ignore[arg-type]
            start = time.perf_counter()
            result = await app.ctx.tools.execute(execution)
            times.append(time.perf_counter() - start)
            assert not result.is_error, result
        return statistics.median(times[n // 10 :]) * 1e6


async def _check(n: int, cwd: str) -> float:
    """The no-hook path of the PreToolUse step alone: whether the user or the project configured a tool hook."""
    async with App() as app:
        load_core(app.ctx, context=False, policy=PolicyConfig())
        hooks = app.ctx.get("hooks")
        agent = _Agent(_Session(_Header(cwd)))
        hooks.has(agent, "PreToolUse", "PostToolUse")  # the project's files are read once, at the first call
        start = time.perf_counter()
        for _ in range(n):
            hooks.has(agent, "PreToolUse", "PostToolUse")
        return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    spawned = max(n // 20, 20)
    noop = HooksConfig.model_validate(
        {"PreToolUse": [{"matcher": "*", "hooks": [{"type": "command", "command": "true"}]}]}
    )
    with tempfile.TemporaryDirectory() as cwd:
        os.chdir(cwd)
        Path(cwd, "a.txt").write_text("hello\n" * 50, encoding="utf-8")
        sandboxed, unconfined = SandboxConfig(), SandboxConfig(approved="off")
        anyio.run(_calls, HooksConfig(), sandboxed, n // 4, cwd)  # warm-up: imports, caches
        offs, nones = [], []
        for _ in range(3):  # interleaved, the best median of each: a busy machine moves between runs
            offs.append(anyio.run(_calls, HooksConfig(enabled=False), sandboxed, n, cwd))
            nones.append(anyio.run(_calls, HooksConfig(), sandboxed, n, cwd))
        off, none = min(offs), min(nones)
        print(f"read_file, hooks plugin off:        {off:9.1f} µs")
        print(f"read_file, no hook configured:      {none:9.1f} µs  ({none - off:+.1f} µs)")
        print(f"  of which the step's check for hooks:  {anyio.run(_check, n * 50, cwd):7.2f} µs (measured alone)")
        confined = anyio.run(_calls, noop, sandboxed, spawned, cwd)
        print(f"read_file, no-op PreToolUse hook:   {confined:9.1f} µs  (sandboxed; {confined - none:+.0f} µs a call)")
        bare = anyio.run(_calls, noop, unconfined, spawned, cwd)
        print(f"read_file, no-op hook, sandbox off: {bare:9.1f} µs  ({bare - none:+.0f} µs a call)")


if __name__ == "__main__":
    main()
