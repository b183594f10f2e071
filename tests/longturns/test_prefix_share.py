"""The quick mode of ``scripts/bench_prefix.py``: in a long turn against each loopback provider, every request
repeats the previous request's prompt byte for byte as its prefix (at least 99 %), except right after a prune or
a compaction, and Anthropic's four cache breakpoints move with the conversation (the 200-step figures are in
RFC 0019)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import anyio
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_prefix.py"


def load_script() -> object:
    spec = importlib.util.spec_from_file_location("bench_prefix", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_prefix", module)  # its dataclasses resolve annotations through it
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("wire", ["chat", "anthropic", "responses"])
async def test_each_request_repeats_the_previous_one_as_its_prefix(wire: str) -> None:
    module: object = load_script()
    with anyio.fail_after(60):
        outcome = await module.run(wire, 30, 4_000, 16_000)  # type: ignore[attr-defined]
    assert outcome.completed and outcome.refused == 0 and outcome.steps == 30
    assert outcome.prunes + outcome.compactions > 0 and outcome.changed > 0  # the exception is exercised
    assert len(outcome.shares) == 29 - outcome.changed
    assert min(outcome.shares) >= 0.99
    # a mode switch mid-turn (issue 35) leaves the system prompt and the tools byte-identical
    assert outcome.switched_at == 15 and outcome.stable_head
    if outcome.switch_share is not None:  # that step did not also follow a prune or compaction
        assert outcome.switch_share >= 0.99
    if wire == "anthropic":
        assert outcome.breakpoints_ok


def test_the_share_is_the_previous_prompt_repeated() -> None:
    module: object = load_script()
    share = module.share  # type: ignore[attr-defined]
    assert share("abcd", "abcdef") == 1.0
    assert share("abcd", "abXdef") == 0.5
    assert share("", "x") == 0.0
