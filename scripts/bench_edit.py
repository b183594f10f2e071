"""The edit matcher and what the model sees, measured (issue 35; not a timed test).

1. The matcher (:func:`dsh.tools.plan_edits`) on a ~500 KB file: a unique exact hit, a hit by the indentation
   rule, a hit by the last rule (blank edge lines, after every other rule failed), and a miss (every rule, then
   the closest lines). Median and worst of ``--runs`` runs, in milliseconds. The tools call it off the event loop.
2. Model-visible characters for the five standard jobs, through the real tools and the output budget: a
   5,000-line file read without a range, one 10,000-character line read, a grep with 10,000 matching lines
   (default mode and content mode), a command printing 200,000 lines, a glob over 500 files.

Run: ``.venv/bin/python scripts/bench_edit.py [--runs 20]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def big_file(target: int = 500_000) -> str:
    parts: list[str] = []
    size = 0
    n = 0
    while size < target:
        block = (
            f"class Handler{n}:\n"
            f"    def handle(self, request):\n"
            f"        value = compute(request, {n})\n"
            f"        if value > {n}:\n"
            f"            return respond(value)\n"
            f"        return None\n\n"
        )
        parts.append(block)
        size += len(block)
        n += 1
    return "".join(parts)


def bench_matcher(runs: int) -> list[str]:
    from dsh.errors import DshError
    from dsh.tools import Edit, plan_edits

    text = big_file()
    middle = text.count("class Handler") // 2
    cases = {
        "exact hit": Edit(f"value = compute(request, {middle})", f"value = compute(request, {middle} + 1)"),
        "indentation hit": Edit(
            f"if value > {middle}:\n    return respond(value)", f"if value >= {middle}:\n    return respond(value)"
        ),
        "last rule hit (blank edges)": Edit(
            f"\n\nif value > {middle}:\n        return respond(value)\n\n\n",
            f"\n\nif value >= {middle}:\n        return respond(value)\n\n\n",
        ),
        "miss (all rules + closest lines)": Edit(f"def handle(self, req):\n    value = compute(req, {middle})", "x"),
    }
    lines = [f"matcher on a {len(text) / 1000:.0f} KB file of {text.count(chr(10))} lines ({runs} runs):"]
    for name, edit in cases.items():
        times: list[float] = []
        outcome = ""
        for _ in range(runs):
            started = time.perf_counter()
            try:
                plan = plan_edits(text, [edit])
                outcome = plan.rules[0]
            except DshError as exc:
                outcome = exc.code or "error"
            times.append((time.perf_counter() - started) * 1000)
        lines.append(f"  {name:34} {outcome:22} median {statistics.median(times):7.1f} ms  worst {max(times):7.1f} ms")
    return lines


async def visible(runs: int) -> list[str]:
    from tests.tools.conftest import FakeAgent

    from dsh.app import load_core
    from dsh.kernel import App
    from dsh.services.tools import ToolExecution

    lines = ["model-visible characters (the text a tool result gives the model, after the output budget):"]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "work"
        work.mkdir()
        (work / "five_thousand.py").write_text(
            "".join(f"line_{i} = compute({i})  # a typical line\n" for i in range(5000))
        )
        (work / "wide.txt").write_text("w" * 10_000 + "\n")
        grep_dir = work / "g"
        grep_dir.mkdir()
        for f in range(100):
            (grep_dir / f"m{f}.txt").write_text("".join(f"needle {f}-{i}\n" for i in range(100)))
        glob_dir = work / "files"
        glob_dir.mkdir()
        for f in range(500):
            (glob_dir / f"module_{f:03}.py").write_text("x = 1\n")
        jobs: list[tuple[str, str, dict[str, Any]]] = [
            ("read a 5,000-line file", "read_file", {"path": "five_thousand.py"}),
            ("read one 10,000-char line", "read_file", {"path": "wide.txt"}),
            ("grep 10,000 matches (default)", "grep", {"pattern": "needle", "path": "g"}),
            ("grep 10,000 matches (content)", "grep", {"pattern": "needle", "path": "g", "output_mode": "content"}),
            ("command printing 200,000 lines", "run_command", {"command": "seq 1 200000"}),
            ("glob over 500 files", "glob", {"pattern": "**/*.py", "path": "files"}),
        ]
        async with App() as app:
            load_core(app.ctx, context=False, policy=False)
            agent: Any = FakeAgent.at(work)
            for number, (name, tool, arguments) in enumerate(jobs):
                result = await app.ctx.tools.execute(ToolExecution(f"c{number}", tool, arguments, agent, None))
                text = "".join(b["text"] for b in result.content if b["type"] == "text")
                lines.append(f"  {name:34} {len(text):7} characters")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    for line in bench_matcher(args.runs):
        print(line)
    for line in anyio.run(visible, args.runs):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
