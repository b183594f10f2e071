"""Diagnostics after an edit (RFC 0037): what each server dsh finds by default adds to one edit, and what the
``diagnose`` stage costs a tool call when no server is involved.

1. Per server (``ruff server`` and ``pylsp`` with pyflakes, each when installed): the cold edit (server start-up,
   ``initialize``, the file opened at its old text, then changed: what an edit pays when no read warmed the
   server) and the median and worst of warm edits (the server running, the file open: one ``didChange`` and its
   diagnostics), for a small and a 2,000-line file.
2. The stage's own cost through the real pipeline (median per call, µs): ``read_file`` and ``edit_file`` of a
   ``.py`` file in a directory that is not a project (``enabled: auto``: no server), against ``enabled: false``.

Run: ``.venv/bin/python scripts/bench_lsp.py [--warm 30] [--calls 400]``.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from dsh.lsp import LspConfig
from dsh.lsp._manager import LspManager

SERVERS = {
    "ruff": ["ruff", "server"],
    "pylsp": [sys.executable, "-m", "pylsp"],
}


def _found(argv: list[str]) -> list[str] | None:
    if argv[0] == sys.executable:
        try:
            import pylsp  # noqa: F401
        except ImportError:
            return None
        return argv
    program = shutil.which(argv[0], path=str(Path(sys.executable).parent)) or shutil.which(argv[0])
    return [program, *argv[1:]] if program else None


async def server_edits(name: str, argv: list[str], lines: int, warm_edits: int) -> str:
    config = LspConfig.model_validate(
        {
            "enabled": True,
            "timeout": 60,
            "start_wait": 60,
            "servers": {name: {"command": argv, "languages": ["python"]}},
        }
    )
    lsp = LspManager(config)
    with tempfile.TemporaryDirectory() as root:
        path = str(Path(root) / "mod.py")
        body = "".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(lines // 2))
        started = time.perf_counter()
        report = await lsp.after_edit([(path, body, body + "y = 1\n")], root, "bench")
        cold = time.perf_counter() - started
        assert report.checked, report.notes
        warm = []
        for n in range(warm_edits):
            text = body + ("print(missing)\n" if n % 2 else "y = 2\n")
            started = time.perf_counter()
            report = await lsp.after_edit([(path, None, text)], root, "bench")
            warm.append(time.perf_counter() - started)
            assert report.checked, report.notes
        await lsp.aclose()
    return (
        f"{name:>6} {lines:>5} lines: cold edit {cold * 1000:7.0f} ms; warm edit median "
        f"{statistics.median(warm) * 1000:6.1f} ms, worst {max(warm) * 1000:6.1f} ms ({warm_edits} edits)"
    )


async def stage_cost(enabled: bool | str, calls: int) -> tuple[float, float]:
    """Median µs of a ``read_file`` and an ``edit_file`` of ``mod.py`` through the pipeline (no policy)."""
    from bench_policy import _Agent, _Header, _Session  # the same stand-in session (scripts/ is on sys.path)

    from dsh.app import load_core
    from dsh.kernel import App
    from dsh.services.tools import ToolExecution

    with tempfile.TemporaryDirectory() as cwd:
        lines = 50
        Path(cwd, "mod.py").write_text("".join(f"x{i} = 0\n" for i in range(lines)))  # noqa: ASYNC240 - set-up
        async with App() as app:
            load_core(app.ctx, context=False, policy=False, lsp=LspConfig.model_validate({"enabled": enabled}))
            agent = _Agent(_Session(_Header(cwd)))
            medians = []
            for name in ("read_file", "edit_file"):
                times = []
                for index in range(calls):
                    arguments: dict[str, Any] = {"path": "mod.py"}
                    if name == "edit_file":  # each edit changes one line: it succeeds (the read came first)
                        line, value = index % lines, index // lines
                        arguments |= {"old_string": f"x{line} = {value}\n", "new_string": f"x{line} = {value + 1}\n"}
                    execution = ToolExecution(f"c{index}", name, arguments, agent)  # type: ignore[arg-type]
                    start = time.perf_counter()
                    result = await app.ctx.tools.execute(execution)
                    times.append(time.perf_counter() - start)
                    assert not result.is_error, result
                medians.append(statistics.median(times[calls // 10 :]) * 1e6)
    return medians[0], medians[1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--warm", type=int, default=30)
    parser.add_argument("--calls", type=int, default=400)
    options = parser.parse_args()
    for name, argv in SERVERS.items():
        found = _found(argv)
        if found is None:
            print(f"{name:>6}: not installed")
            continue
        for lines in (20, 2000):
            print(asyncio.run(server_edits(name, found, lines, options.warm)))
    off = anyio.run(stage_cost, False, options.calls)
    auto = anyio.run(stage_cost, "auto", options.calls)
    print(f"read_file: {off[0]:7.1f} µs off, {auto[0]:7.1f} µs auto (no project: no server)")
    print(f"edit_file: {off[1]:7.1f} µs off, {auto[1]:7.1f} µs auto (no project: no server)")


if __name__ == "__main__":
    main()
