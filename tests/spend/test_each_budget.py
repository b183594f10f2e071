"""Each kind of budget (turn / session x dollars / tokens) stops a turn over the wire, the session loads in a second
daemon, and a prompt after raising the budget with ``/budget`` runs (RFC 0039; the loopback provider, the official
SDK client)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.spend._helpers import assert_balanced, text_chunks, tool_reply, write_config
from tests.support.editor import EditorClient, read_log, run_editor
from tests.support.provider_server import FakeProvider, Reply
from tests.support.provider_wire import oa_text_reply

READ = {"path": "a.txt"}
PRICED = "providers:\n  openai:\n    prices: {priced: {input: 1000000, output: 1000000}}\n"
"""``openai:priced`` costs one dollar a token: spend in dollars and in tokens are the same figures."""


@pytest.mark.parametrize("budget", ["turn_usd", "session_usd", "turn_tokens", "session_tokens"])
async def test_each_budget_stops_a_turn_cleanly_and_the_session_goes_on_once_raised(
    budget: str, server: FakeProvider, tmp_path: Path
) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "a.txt").write_text("alpha\n")
    write_config(tmp_path, PRICED + f"budget: {{{budget}: 10}}\n")
    server.script(
        tool_reply("c1", "read_file", READ, 5, 3),  # 8 of 10: the warning
        tool_reply("c2", "read_file", READ, 2, 1),  # 11 of 10: c2 is not run, the turn stops
        Reply(events=oa_text_reply("after raising", prompt=1, completion=1)),
    )
    env = {"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "test"}
    async with run_editor(tmp_path, "openai:priced", EditorClient([]), env=env) as editor:
        session = (await editor.new_session()).session_id
        response = await editor.prompt(session, "read a.txt twice")
        assert response.stop_reason == "max_turn_requests"
        detail = response.model_dump(by_alias=True, exclude_none=True)["_meta"]["dsh"]["budget"]
        assert (detail["budget"], detail["limit"], detail["spent"]) == (budget, 10, 11)
        shown = text_chunks(editor.updates(session))
        assert shown.count("80 % of the") == 1, shown
        assert f"Raise it with /budget {budget} 20" in shown
        assert editor.final(session, "c1")["status"] == "completed"
        assert editor.final(session, "c2")["status"] == "failed"
    assert len(server.requests) == 2
    events = read_log(tmp_path, session)
    assert_balanced(events)
    assert [e["type"] for e in events].count("spend/stop") == 1
    async with run_editor(tmp_path, "openai:priced", EditorClient([]), env=env, name="second") as editor:
        await editor.load_session(session)
        assert f"/budget {budget} 20" in text_chunks(editor.updates(session))  # the stop, replayed
        if budget.startswith("session_"):  # still reached after the load: no model call
            refused = await editor.prompt(session, "go on")
            assert refused.stop_reason == "max_turn_requests"
            assert len(server.requests) == 2
        assert (await editor.prompt(session, f"/budget {budget} 20")).stop_reason == "end_turn"
        again = await editor.prompt(session, "go on")
        assert again.stop_reason == "end_turn"
        assert "after raising" in text_chunks(editor.updates(session))
        shown = text_chunks(editor.updates(session))
        assert shown.count("80 % of the") == 0  # said once per session: not again after the load
    assert len(server.requests) == 3
    assert_balanced(read_log(tmp_path, session))
