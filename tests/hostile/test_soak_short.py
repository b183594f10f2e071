"""The short mode of ``scripts/stress_soak.py`` (issue #30): the mixed load (tool prompts, MCP calls, cancels,
lists, closes, loads) against the real daemon, every answer checked; the 10-minute slope is in RFC 0024."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "stress_soak.py"


def test_the_soak_runs_every_operation_and_every_answer_is_right() -> None:
    spec = importlib.util.spec_from_file_location("stress_soak", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("stress_soak", module)  # its dataclasses resolve annotations through it
    spec.loader.exec_module(module)
    report, summary = module.run(3.0)  # raises Failure on any wrong answer, error log line or bad exit
    for operation in ("new", "tool", "mcp", "text", "cancel", "list", "close", "load"):
        assert report.operations.get(operation, 0) >= 1, (operation, summary)
