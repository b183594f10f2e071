"""Per-turn cost over the wire as a session grows: dsh against the SDK peer agent, one-word prompts.

One process per agent, one session, ``--turns`` one-word echo prompts sent one after the other (each written
when the previous one is answered). For each turn we time prompt written → answer read. The table gives the
median ms per turn in windows around turns 50, 500, 1,000 and the last one (``--window`` turns each), and the
ratio of the last window to the window at turn 50: a flat per-turn cost gives a ratio near 1 (issue #12 target:
≤ 1.5 at turn 5,000). Both agents run in the same invocation, rotated (dsh first, then the peer, by default).

dsh runs as ``python -m dsh acp`` with its default ``echo`` model and JSONL persistence (its default) into a
temporary data directory. Not a test: it prints numbers and never fails.

Run: ``.venv/bin/python scripts/bench_turns.py`` (``--turns 5000`` takes a few minutes; ``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_acp import AGENTS, AgentProcess, add_before

TARGET_RATIO = 1.5


def run_turns(name: str, command: list[str], turns: int, data_dir: str) -> list[float]:
    if name.startswith("dsh"):  # AgentProcess strips DSH_* from the environment: name the data directory explicitly
        command = ["env", f"DSH_DATA_DIR={data_dir}", *command]
    agent = AgentProcess(command)
    try:
        agent.initialize()
        session_id = agent.new_session()
        params = {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]}
        times: list[float] = []
        for _ in range(turns):
            start = time.perf_counter()
            response = agent.wait_response(agent.request("session/prompt", params))
            times.append(time.perf_counter() - start)
            assert response["result"]["stopReason"] == "end_turn", response
        return times
    finally:
        agent.close()


def window(times: list[float], at: int, size: int) -> float:
    """Median seconds per turn of the *size* turns ending at turn *at* (1-based)."""
    end = min(at, len(times))
    return statistics.median(times[max(0, end - size) : end])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=5000)
    parser.add_argument("--window", type=int, default=50)
    parser.add_argument("--only", choices=sorted(AGENTS))
    parser.add_argument("--before", type=Path, help="also measure the dsh of this source tree ('dsh before')")
    parser.add_argument("--quick", action="store_true", help="500 turns, windows of 20")
    parser.add_argument(
        "--data-dir",
        type=Path,
        help="where the session files go (default: a temporary directory; every turn ends with an fsync, so a "
        "disk another process is writing to adds its waits to every turn: /dev/shm measures dsh alone)",
    )
    args = parser.parse_args()
    if args.quick:
        args.turns, args.window = 500, 20
    add_before(args.before)
    agents = {name: command for name, command in AGENTS.items() if args.only in (None, name)}
    began = time.perf_counter()
    marks = sorted({m for m in (50, 500, 1000, args.turns) if m <= args.turns})
    results: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="dsh-bench-turns-", dir=args.data_dir) as scratch:
        for name, command in agents.items():
            results[name] = run_turns(name, command, args.turns, scratch)
    print(
        f"turns benchmark: {args.turns} one-word turns in one session, windows of {args.window}; "
        f"dsh with JSONL persistence; python {sys.version.split()[0]}; "
        f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}; run took {time.perf_counter() - began:.1f} s"
    )
    header = ["agent", *(f"turn {m}" for m in marks), f"turn {args.turns} / turn 50", "target", "meets"]
    rows = [header]
    for name, times in results.items():
        values = [window(times, m, args.window) for m in marks]
        ratio = values[-1] / values[0]
        rows.append(
            [
                name,
                *(f"{v * 1e3:.3f} ms" for v in values),
                f"{ratio:.2f}",
                f"<= {TARGET_RATIO}",
                "yes" if ratio <= TARGET_RATIO else "NO",
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for index, row in enumerate(rows):
        print(" | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
        if index == 0:
            print("-+-".join("-" * width for width in widths))


if __name__ == "__main__":
    main()
