"""What the sandbox costs per command (RFC 0028): ``run_process(["true"])`` and ``bash -c 'cat README.md'``
unconfined (``off``, as before the sandbox), at ``read-only`` and at ``workspace-write`` (with a ``.git`` bound
read-only). Prints the median and p99 wall time of N runs of each, the CPU time per command (this process and the
children: what a busy machine cannot inflate), and the one-off costs (the machine probe, the first
ruleset of a session). The application is loaded first, so the process forks at a daemon's size.

    .venv/bin/python scripts/bench_sandbox.py [N]
"""

from __future__ import annotations

import os
import resource
import statistics
import sys
import tempfile
import time
from types import SimpleNamespace
from typing import Any

import anyio

from dsh.sandbox import Sandbox, support
from dsh.tools import run_process


def _p99(times: list[float]) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def _cpu() -> float:
    """CPU seconds used so far by this process and its reaped children (system and user)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


async def _run(sandbox: Sandbox, level: Any, command: Any, root: str, runs: int) -> tuple[float, float, float]:
    execution: Any = SimpleNamespace(agent=None)
    times = []
    with sandbox.contain(execution, level, str(command), (root,)):
        await run_process(command, cwd=root, timeout=10, output_limit=100_000)  # warm: the ruleset is built once
        cpu = _cpu()
        for _ in range(runs):
            start = time.perf_counter()
            result = await run_process(command, cwd=root, timeout=10, output_limit=100_000)
            times.append(time.perf_counter() - start)
            assert result.exit_code == 0, result.output
        cpu = (_cpu() - cpu) / runs
    return statistics.median(times) * 1000, _p99(times) * 1000, cpu * 1000


async def measure(runs: int) -> list[tuple[str, float, float, float]]:
    from dsh.app import load_core  # noqa: F401 - a daemon-sized process: fork cost grows with it

    start = time.perf_counter()
    machine = support()
    probe = (time.perf_counter() - start) * 1000
    print(f"machine: {machine.describe()} (probe {probe:.1f} ms, once per process)")
    sandbox = Sandbox(machine=machine)
    rows = []
    with tempfile.TemporaryDirectory() as root:
        os.mkdir(os.path.join(root, ".git"))
        await anyio.Path(root, "README.md").write_text("hello\n" * 100, encoding="utf-8")
        execution: Any = SimpleNamespace(agent=None)
        with sandbox.contain(execution, "read-only", "true", (root,)):
            from dsh.sandbox import active

            containment = active()
            assert containment is not None
            start = time.perf_counter()
            await containment.plan()
            elapsed = (time.perf_counter() - start) * 1000
            rows.append(("first ruleset of a session", elapsed, elapsed, 0.0))
        for label, command in (("true", ["true"]), ("bash -c 'cat README.md'", "cat README.md")):
            for level in ("off", "read-only", "workspace-write"):
                median, p99, cpu = await _run(sandbox, level, command, root, runs)
                rows.append((f"{label} at {level}", median, p99, cpu))
        sandbox.close()
    return rows


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; wall times include waiting for a CPU")
    for label, median, p99, cpu in anyio.run(measure, runs):
        print(f"{label:>42}: median {median:6.2f} ms, p99 {p99:6.2f} ms, CPU {cpu:5.2f} ms per command (N={runs})")


if __name__ == "__main__":
    main()
