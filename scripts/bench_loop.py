"""Throughput of the agent loop with the echo model and no I/O: turns/s and chunks/s.

The chunk path (model delta → ``assistant/chunk`` session event → ``agent/stream-chunk``) is the hot path of the
whole product, so this prints per-chunk cost too. Then the per-turn cost as one session grows to
``--scaling-turns`` turns (issue #12: turn 5,000 within 1.5x of turn 50). Run: ``.venv/bin/python scripts/bench_loop.py``.
Not a test: it prints numbers and never fails on them.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

import anyio

from dsh.app import load_core
from dsh.kernel import App
from dsh.services.agents import AgentOptions


async def scaling(turns: int, size: int) -> None:
    """Per-turn cost as one session grows: median ms per one-word turn in windows at turns 50 … *turns*."""
    async with App() as app:
        ctx = app.ctx
        load_core(ctx)
        agent = ctx.agent_loop.create("scaling", AgentOptions(model="echo"))
        times: list[float] = []
        for _ in range(turns):
            start = time.perf_counter()
            agent.send([{"type": "text", "text": "hi"}])
            await agent.when_idle()
            times.append(time.perf_counter() - start)
    marks = sorted({m for m in (50, 500, 1000, turns) if m <= turns})
    values = [statistics.median(times[max(0, m - size) : m]) for m in marks]
    cells = "  ".join(f"turn {m}: {v * 1e3:.3f} ms" for m, v in zip(marks, values, strict=True))
    ratio = values[-1] / values[0]
    print(
        f"per-turn cost in one session (median of {size}-turn windows, in process): {cells}  "
        f"turn {turns} / turn 50 = {ratio:.2f} (target <= 1.5: {'meets' if ratio <= 1.5 else 'MISSES'})"
    )


async def bench(turns: int, words: int, repeats: int) -> None:
    async with App() as app:
        ctx = app.ctx
        load_core(ctx)
        agent = ctx.agent_loop.create("bench", AgentOptions(model="echo"))
        # Warm-up.
        agent.send([{"type": "text", "text": "warm up"}])
        await agent.when_idle()

        turn_rates = []
        for run in range(repeats):
            agent = ctx.agent_loop.create(f"bench-{run}", AgentOptions(model="echo"))
            start = time.perf_counter()
            for _ in range(turns):
                agent.send([{"type": "text", "text": "hi"}])
                await agent.when_idle()
            turn_rates.append(turns / (time.perf_counter() - start))

        text = " ".join(f"w{i}" for i in range(words))
        chunk_rates = []
        for _ in range(repeats):
            gc.collect()
            start = time.perf_counter()
            agent.send([{"type": "text", "text": text}])
            await agent.when_idle()
            chunk_rates.append(words / (time.perf_counter() - start))

    turn_rates.sort()
    chunk_rates.sort()
    best_turns, best_chunks = turn_rates[-1], chunk_rates[-1]
    median_turns, median_chunks = turn_rates[len(turn_rates) // 2], chunk_rates[len(chunk_rates) // 2]
    print(
        f"turns/s   (1-word echo turns, {turns} per fresh session): median {median_turns:,.0f}  best {best_turns:,.0f}"
    )
    print(
        f"chunks/s  ({words}-word echo turn):             median {median_chunks:,.0f}  best {best_chunks:,.0f}"
        f"  ({1e6 / median_chunks:.1f} µs/chunk)"
    )


def long_session(turns: int, window: int) -> None:
    """Time per turn at turn 100 and at the end of a long compacted session (scripts/stress_compaction.py)."""
    from stress_compaction import run_session

    outcome = anyio.run(run_session, turns, window)
    marks = "  ".join(f"turn {mark}: {seconds * 1e3:.2f} ms" for mark, seconds in sorted(outcome.per_turn.items()))
    print(
        f"long session ({turns} echo turns, window {window}, {outcome.compactions} compactions, "
        f"failed {len(outcome.failed)}): {marks}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--words", type=int, default=50000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--scaling-turns", type=int, default=5000, help="turns of the per-turn-cost run (0: skip)")
    parser.add_argument("--window", type=int, default=50)
    parser.add_argument("--long-turns", type=int, default=2000, help="turns of the compacted long session (0: skip)")
    args = parser.parse_args()
    anyio.run(bench, args.turns, args.words, args.repeats)
    if args.scaling_turns:
        anyio.run(scaling, args.scaling_turns, args.window)
    if args.long_turns:
        long_session(args.long_turns, 20_000)


if __name__ == "__main__":
    main()
