"""The short mode of ``scripts/stress_persistence.py`` (#10 items 1, 2, 6b): a disk that fills and frees under a
streaming session, deep appends refused, every chunk on disk and none held in memory. Long runs: run the script."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "stress_persistence.py"


async def test_the_short_stress_run_holds_every_promise(tmp_path: Path) -> None:
    with anyio.fail_after(120):
        result = await anyio.run_process(
            [sys.executable, str(SCRIPT), "--short", "--data-dir", str(tmp_path)], check=False
        )
    output = result.stdout.decode() + result.stderr.decode()
    assert result.returncode == 0, output[-3000:]
    figures = dict(
        (name.strip(), value.strip())
        for name, _, value in (line.partition(":") for line in result.stdout.decode().splitlines())
    )
    assert int(figures["failed_turns"].replace(",", "")) > 0  # the run did meet a full disk
