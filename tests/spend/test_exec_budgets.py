"""``dsh exec --max-cost USD --max-tokens N``: a budget stops the run at a step boundary, exit status 3 (RFC 0039)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.spend._helpers import assert_balanced, tool_reply, write_config
from tests.support.editor import call, read_log, write_script
from tests.support.headless import exec_run
from tests.support.provider_server import FakeProvider, Reply
from tests.support.provider_wire import oa_text_reply

READ = {"path": "a.txt"}
PRICED = "providers:\n  openai:\n    prices: {priced: {input: 1000000, output: 1000000}}\n"
"""``openai:priced`` costs one dollar a token: the figures of a test are its token counts."""


def _of(lines: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [line for line in lines if line.get("type") == kind]


def test_max_cost_stops_the_run_with_exit_3_after_one_warning(server: FakeProvider, tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "a.txt").write_text("alpha\n")
    write_config(tmp_path, PRICED)
    server.script(
        tool_reply("c1", "read_file", READ, 5, 4),  # $9 of $10: the warning
        tool_reply("c2", "read_file", READ, 2, 1),  # $12: c2 is answered without running, the run stops
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


def test_a_stop_hook_that_blocks_the_stop_does_not_carry_a_turn_past_its_budget(
    server: FakeProvider, tmp_path: Path
) -> None:
    (tmp_path / "project" / "hooks").mkdir(parents=True)
    hook = tmp_path / "project" / "hooks" / "block.sh"  # in the project: the hook runs sandboxed
    hook.write_text('#!/bin/bash\nprintf \'%s\' \'{"decision":"block","reason":"keep going"}\'\n')
    hook.chmod(0o755)
    write_config(tmp_path, f"hooks:\n  Stop:\n    - hooks: [{{type: command, command: {hook}}}]\n")
    server.script(
        Reply(events=oa_text_reply("first", prompt=20, completion=3)),  # 23 tokens of 10: the hook would go on
        Reply(events=oa_text_reply("never asked")),
    )
    env = {"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "test"}
    run = exec_run(tmp_path, "--json", "--max-tokens", "10", "go", model="openai:local", env=env)
    assert run.code == 3, run.stderr
    assert run.lines[-1]["budget"]["budget"] == "turn_tokens"
    assert len(server.requests) == 1
    assert_balanced(read_log(tmp_path, run.lines[-1]["sessionId"]))


def test_a_session_budget_already_reached_refuses_the_next_run_before_any_model_call(tmp_path: Path) -> None:
    write_config(tmp_path, "budget: {session_tokens: 10}\n")
    steps: list[dict[str, Any]] = [
        {"text": "first answer", "usage": {"input_tokens": 40, "output_tokens": 10}},
        {"text": "never asked"},
    ]
    model = write_script(tmp_path / "script.json", steps)
    first = exec_run(tmp_path, "--json", "one", model=model)
    assert first.code == 0, first.stderr  # the turn ended on its own: nothing was stopped
    session = first.lines[-1]["sessionId"]
    second = exec_run(tmp_path, "--json", "--session", session, "two", model=model)
    assert second.code == 3, second.stderr
    result = second.lines[-1]
    assert result["stopReason"] == "budget" and result["budget"]["budget"] == "session_tokens"
    assert result["budget"]["spent"] == 50 and "error" not in result
    assert "never asked" not in second.stdout
    assert "the session budget of 10 tokens was reached (50 tokens spent)" in second.stderr
    events = read_log(tmp_path, session)
    assert_balanced(events)
    assert [e["type"] for e in events].count("usage") == 1
