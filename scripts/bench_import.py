"""Start-up import cost: ``import dsh`` and the modules a front end loads, measured in fresh interpreters.

Prints the median wall time of ``python -c "import X"`` over several spawns minus a bare interpreter, and the
``-X importtime`` cumulative total for the top module. Not a test: it prints numbers.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

MODULES = ["dsh", "dsh.kernel", "dsh.services.sessions", "dsh.loop", "dsh.app", "dsh.cli"]


def spawn(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - start


def importtime_total(module: str) -> int:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"], capture_output=True, text=True, check=True
    )
    for line in reversed(result.stderr.splitlines()):
        parts = [p.strip() for p in line.split("|")]
        if len(parts) == 3 and parts[2] == module:
            return int(parts[1])
    return -1


def main() -> None:
    runs = 7
    bare = statistics.median(spawn("pass") for _ in range(runs))
    print(f"bare interpreter: {bare * 1000:.0f} ms (median of {runs})")
    print(f"{'module':<24} {'wall - bare':>12} {'importtime cumulative':>22}")
    for module in MODULES:
        wall = statistics.median(spawn(f"import {module}") for _ in range(runs)) - bare
        print(f"{module:<24} {wall * 1000:>9.0f} ms {importtime_total(module) / 1000:>19.1f} ms")


if __name__ == "__main__":
    main()
