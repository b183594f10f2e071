"""``dsh exec --max-cost USD --max-tokens N``: a budget stops the run at a step boundary, exit status 3 (RFC 0039)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.spend._helpers import assert_balanced, write_config
from tests.support.editor import call, read_log, write_script
from tests.support.headless import exec_run
from tests.support.provider_server import FakeProvider, Reply
from tests.support.provider_wire import DONE, oa_chunk, oa_finish, oa_text_reply, oa_tool_delta, oa_usage

PRICED = "providers:\n  openai:\n    prices: {priced: {input: 1000000, output: 1000000}}\n"
"""``openai:priced`` costs one dollar a token: the figures of a test are its token counts."""


def _read(call_id: str, prompt: int, completion: int) -> Reply:
    return Reply(
        events=[
            oa_chunk({"role": "assistant", "content": None}),
            oa_tool_delta(0, json.dumps({"path": "a.txt"}), call_id=call_id, name="read_file"),
            oa_finish("tool_calls"),
            oa_usage(prompt, completion),
            DONE,
        ]
    )


def _of(lines: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [line for line in lines if line.get("type") == kind]


def test_max_cost_stops_the_run_with_exit_3_after_one_warning(server: FakeProvider, tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "a.txt").write_text("alpha\n")
    write_config(tmp_path, PRICED)
    server.script(
        _read("c1", 5, 4),  # $9 of $10: the warning
        _read("c2", 2, 1),  # $12: c2 is answered without running, the run stops
        Reply(events=oa_text_reply("never asked")),
    )
    env = {"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "test"}
    run = exec_run(tmp_path, "--json", "--max-cost", "10", "read a.txt twice", model="openai:priced", env=env)
    assert run.code == 3, run.stderr
    result = run.lines[-1]
    assert result["type"] == "result" and result["stopReason"] == "budget"
    assert result["budget"]["budget"] == "turn_usd" and result["budget"]["limit"] == 10
    assert result["budget"]["spent"] == 12
    assert "error" not in result
    assert len(server.requests) == 2  # no model call after the limit
    notices = _of(run.lines, "notice")
    assert len(notices) == 1 and "90 % of the turn budget spent" in notices[0]["message"], notices
    events = read_log(tmp_path, result["sessionId"])
    assert_balanced(events)
    c2 = [e["data"] for e in events if e["type"] == "tool/result" and e["data"]["call_id"] == "c2"]
    assert c2[0]["error"]["code"] == "BUDGET_REACHED"
    # the run's limit is the run's: nothing of it is stored in the session
    assert not [e for e in events if e["type"] == "spend/limits"]


def test_max_tokens_holds_for_a_model_without_a_price_and_says_once_that_max_cost_cannot(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "a.txt").write_text("alpha\n")
    usage = {"input_tokens": 550, "output_tokens": 50}
    steps: list[dict[str, Any]] = [
        {**call("read_file", "c1", path="a.txt"), "usage": usage},
        {**call("read_file", "c2", path="a.txt"), "usage": usage},
        {"text": "never asked"},
    ]
    model = write_script(tmp_path / "script.json", steps)
    run = exec_run(tmp_path, "--max-tokens", "1000", "--max-cost", "0.5", "read it", model=model)
    assert run.code == 3, run.stderr
    assert "the turn budget of 1,000 tokens was reached (1,200 tokens spent)" in run.stderr
    assert "/budget turn_tokens 2000" in run.stderr
    said = [line for line in run.stderr.splitlines() if line.startswith("dsh: The cost budget cannot be enforced")]
    assert len(said) == 1 and "scripted:" in said[0] and "Token budgets still hold" in said[0], run.stderr


def test_budget_exit_code_is_in_the_help(tmp_path: Path) -> None:
    run = exec_run(tmp_path, "--help", env={"COLUMNS": "200"})
    assert run.code == 0
    assert "3 a spend budget stopped it" in run.stdout
    assert "--max-cost" in run.stdout and "--max-tokens" in run.stdout
