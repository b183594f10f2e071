"""What the tool call pipeline (RFC 0017) costs per call: ``ctx.tools.execute`` of ``read_file`` and of a prepared
``run_command`` refused in plan mode (prepare + decide, nothing runs), with the policy loaded and without it, and
the shell split of a command line (first parse, then distinct lines), the split off the event loop (a worker thread
for a line not seen before, the cache for one seen), and the worst inputs (a line just under 64 KiB, ``$(`` nested
5,000 deep). Prints medians in microseconds; never fails.

    .venv/bin/python scripts/bench_policy.py [N]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from dsh.app import load_core
from dsh.kernel import App
from dsh.policy import PolicyConfig
from dsh.services.tools import ToolExecution


@dataclass
class _Header:
    cwd: str


@dataclass
class _Session:
    header: _Header
    id: str = "bench"
    log: list[Any] = field(default_factory=list)

    def append(self, kind: str, data: Any) -> None:
        self.log.append((kind, data))


@dataclass
class _Agent:
    session: _Session


async def _calls(policy: PolicyConfig | bool, name: str, arguments: dict[str, Any], n: int, cwd: str) -> float:
    async with App() as app:
        load_core(app.ctx, context=False, policy=policy if isinstance(policy, PolicyConfig) else False)
        agent = _Agent(_Session(_Header(cwd)))
        times = []
        for index in range(n):
            execution = ToolExecution(f"c{index}", name, arguments, agent)  # type: ignore[arg-type]
            start = time.perf_counter()
            await app.ctx.tools.execute(execution)
            times.append(time.perf_counter() - start)
        return statistics.median(times[n // 10 :]) * 1e6


def _glob_rules(n: int) -> float:
    """The rule matcher alone: an edit decided against six configured path rules (the last one allows)."""
    from dsh.policy import CallFacts, SessionPolicy, parse_pattern

    patterns = [("deny", "*.lock"), ("deny", "secrets/**"), ("ask", "docs/*.md"), ("deny", "**/.env")]
    patterns += [("allow", "tests/**/*.py"), ("allow", "src/**")]
    policy = SessionPolicy(rules=[parse_pattern(f"edit_file({p})", d) for d, p in patterns])  # type: ignore[arg-type]
    facts = CallFacts("edit_file", "edit", "/project", paths=("/project/src/pkg/module.py",))
    assert policy.decide(facts).verdict == "allow"
    times = []
    for _ in range(n):
        start = time.perf_counter()
        policy.decide(facts)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    with tempfile.TemporaryDirectory() as cwd:
        Path(cwd, "a.txt").write_text("hello\n" * 50, encoding="utf-8")
        read = {"path": "a.txt"}
        plan = PolicyConfig(mode="plan")
        print(f"read_file, no policy:      {anyio.run(_calls, False, 'read_file', read, n, cwd):8.1f} µs")
        print(f"read_file, policy default: {anyio.run(_calls, PolicyConfig(), 'read_file', read, n, cwd):8.1f} µs")
        command = {"command": "git status && npm test -- -k x | tee out.txt"}
        print(f"run_command refused (plan): {anyio.run(_calls, plan, 'run_command', command, n, cwd):7.1f} µs")
    print(f"decide, 6 glob rules (edit): {_glob_rules(n):7.2f} µs")
    from dsh.policy import split_command

    start = time.perf_counter()
    split_command("ls -la && git diff HEAD~1 | grep x; echo $(date) > f")
    first = (time.perf_counter() - start) * 1e6
    lines = [f"cmd {i} && git status | wc -l" for i in range(n)]
    start = time.perf_counter()
    for line in lines:
        split_command(line)
    print(
        f"split_command: first {first:.0f} µs (grammar load), then {(time.perf_counter() - start) / n * 1e6:.1f} µs each"
    )
    print(f"split_command_async, a line not seen before (worker thread): {anyio.run(_async_splits, n):.1f} µs median")
    print(
        f"split_command_async, the same line again (cache, no thread):  {anyio.run(_async_splits, n, True):.1f} µs median"
    )
    worst = "cat " + " ".join(f"f{i}.txt" for i in range(6600))  # just under 64 KiB: the longest line parsed
    start = time.perf_counter()
    split_command(worst)
    print(
        f"split_command, a {len(worst) // 1024} KiB line: {(time.perf_counter() - start) * 1e3:.1f} ms (in the worker)"
    )
    deep = "echo " + "$(" * 5000 + "x" + ")" * 5000
    start = time.perf_counter()
    split_command(deep)
    print(f"split_command, $( nested 5,000 deep: {(time.perf_counter() - start) * 1e3:.1f} ms (opaque)")


async def _async_splits(n: int, same: bool = False) -> float:
    from dsh.policy import split_command_async

    times = []
    for index in range(n):
        line = "git diff --stat && ls -la src" if same else f"git diff --stat {index} && ls -la src"
        start = time.perf_counter()
        await split_command_async(line)
        times.append(time.perf_counter() - start)
    return statistics.median(times[n // 10 :]) * 1e6


if __name__ == "__main__":
    main()
