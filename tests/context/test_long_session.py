"""The quick mode of ``scripts/stress_compaction.py``: a long echo session in a small window runs without a
failed turn, compacting repeatedly, and no request passes the window (the 2,000-turn run is the script's
default; its figures are in the RFC)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import anyio

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "stress_compaction.py"


async def test_a_long_session_stays_inside_a_small_window() -> None:
    spec = importlib.util.spec_from_file_location("stress_compaction", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("stress_compaction", module)  # its dataclasses resolve annotations through it
    spec.loader.exec_module(module)
    with anyio.fail_after(120):
        outcome = await module.run_session(300, 5_000)
    assert outcome.turns == 300
    assert outcome.failed == []
    assert outcome.compactions >= 2
    assert 0 < outcome.max_prompt <= 5_000
