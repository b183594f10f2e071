"""Token budgets over the wire: a real ``dsh acp``, the official SDK client, the scripted model reporting usage
(issue 38, item 3; RFC 0039)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.spend._helpers import assert_balanced, text_chunks, write_config
from tests.support.editor import EditorClient, call, read_log, run_editor, write_script


def _usage(tokens: int) -> dict[str, int]:
    return {"input_tokens": tokens - 50, "output_tokens": 50}


def _meta(response: Any) -> dict[str, Any]:
    return response.model_dump(by_alias=True, exclude_none=True).get("_meta") or {}


async def test_turn_tokens_warn_once_then_stop_at_a_step_boundary_and_the_next_turn_runs(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "a.txt").write_text("alpha\n")
    write_config(tmp_path, "budget:\n  turn_tokens: 1000\n")
    steps: list[dict[str, Any]] = [
        {**call("read_file", "c1", path="a.txt"), "usage": _usage(850)},  # 85 %: the warning, once
        {**call("read_file", "c2", path="a.txt"), "usage": _usage(100)},  # 95 %: no second warning
        {**call("read_file", "c3", path="a.txt"), "usage": _usage(200)},  # 115 %: c3 never runs, the turn stops
        {"text": "never reached in turn 1", "usage": _usage(10)},
    ]
    model = write_script(tmp_path / "script.json", steps)
    async with run_editor(tmp_path, model, EditorClient([])) as editor:
        session = (await editor.new_session()).session_id
        await editor.conn.set_session_mode(session_id=session, mode_id="bypass")
        response = await editor.prompt(session, "read it three times")
        assert response.stop_reason == "max_turn_requests"
        budget = _meta(response)["dsh"]["budget"]
        assert budget["budget"] == "turn_tokens" and budget["limit"] == 1000 and budget["spent"] == 1150
        shown = text_chunks(editor.updates(session))
        assert shown.count("85 % of the turn budget spent") == 1, shown
        assert "95 %" not in shown
        assert "the turn budget of 1,000 tokens was reached (1,150 tokens spent)" in shown
        assert "/budget turn_tokens 2000" in shown
        assert editor.final(session, "c3")["status"] == "failed"
        # a new turn: the turn budget starts again, the model is called (the script's next step)
        again = await editor.prompt(session, "and now?")
        assert again.stop_reason == "end_turn"
        assert "never reached in turn 1" in text_chunks(editor.updates(session))
    events = read_log(tmp_path, session)
    assert_balanced(events)
    c3 = [e["data"] for e in events if e["type"] == "tool/result" and e["data"]["call_id"] == "c3"]
    assert c3[0]["is_error"] and c3[0]["error"]["code"] == "BUDGET_REACHED"
    assert "Not run" in c3[0]["content"][0]["text"]
    stops = [e["data"] for e in events if e["type"] == "spend/stop"]
    assert [s["turn"] for s in stops] == [1]
    # the stop is logged after the turn's last step closed and before its turn/end
    kinds = [e["type"] for e in events]
    first_end = kinds.index("turn/end")
    assert kinds[first_end - 1] == "spend/stop"
    # loading the session replays the stop's message
    async with run_editor(tmp_path, model, EditorClient([]), name="second") as editor:
        await editor.load_session(session)
        shown = text_chunks(editor.updates(session))
        assert "the turn budget of 1,000 tokens was reached" in shown


async def test_session_tokens_stop_refuses_the_next_prompt_until_raised_with_the_budget_command(
    tmp_path: Path,
) -> None:
    write_config(tmp_path, "budget:\n  session_tokens: 500\n")
    steps: list[dict[str, Any]] = [
        {"text": "first answer", "usage": _usage(600)},  # the turn ends on its own, past the session budget
        {"text": "after raising", "usage": _usage(100)},
    ]
    model = write_script(tmp_path / "script.json", steps)
    async with run_editor(tmp_path, model, EditorClient([])) as editor:
        session = (await editor.new_session()).session_id
        assert (await editor.prompt(session, "one")).stop_reason == "end_turn"
        refused = await editor.prompt(session, "two")
        assert refused.stop_reason == "max_turn_requests"
        assert _meta(refused)["dsh"]["budget"]["budget"] == "session_tokens"
        assert "the session budget of 500 tokens was reached" in text_chunks(editor.updates(session))
        shown = await editor.prompt(session, "/budget")
        assert shown.stop_reason == "end_turn"
        assert "session tokens: 600 tokens of 500 tokens" in text_chunks(editor.updates(session))
        assert (await editor.prompt(session, "/status")).stop_reason == "end_turn"
        assert "Budget: session tokens: 600 tokens of 500 tokens" in text_chunks(editor.updates(session))
        assert (await editor.prompt(session, "/budget session_tokens 5000")).stop_reason == "end_turn"
        third = await editor.prompt(session, "three")
        assert third.stop_reason == "end_turn"
        assert "after raising" in text_chunks(editor.updates(session))
    events = read_log(tmp_path, session)
    assert_balanced(events)
    # the refused turn called no model: exactly two usage events in the whole log
    assert [e["type"] for e in events].count("usage") == 2
    assert any(e["type"] == "spend/limits" for e in events)
