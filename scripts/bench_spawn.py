"""What the parent-death signal costs per command (RFC 0010): ``run_process(["true"])`` with the signal set by
``setpriv --pdeathsig`` (the default where util-linux has it), by a ``preexec_fn`` calling ``prctl`` (the fallback;
it makes :mod:`subprocess` fork instead of vfork), and without any. Prints the median of N runs of each.

    .venv/bin/python scripts/bench_spawn.py [N]
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable

import anyio

from dsh.tools import _process


def _none() -> Callable[[], None] | None:
    return None


async def _run(runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        await _process.run_process(["true"], cwd=os.getcwd(), timeout=10, output_limit=1000)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


async def measure(runs: int) -> dict[str, float]:
    results: dict[str, float] = {}
    die_with_parent = _process._die_with_parent
    await _process._death_wrapper()
    setpriv = _process._setpriv
    try:
        results["setpriv --pdeathsig" if setpriv else "setpriv (not available)"] = await _run(runs)
        _process._setpriv = None
        results["preexec_fn prctl"] = await _run(runs)
        _process._die_with_parent = _none
        results["no parent-death signal"] = await _run(runs)
    finally:
        _process._setpriv, _process._die_with_parent = setpriv, die_with_parent
    return results


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    for label, ms in anyio.run(measure, runs).items():
        print(f"{label:>24}: {ms:6.2f} ms per command (median of {runs})")


if __name__ == "__main__":
    main()
