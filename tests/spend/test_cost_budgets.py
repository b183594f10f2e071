"""Dollar budgets over the wire with the loopback provider: a sub-agent's spend stops its parent's turn, the
warning is one ``notice`` (a message for older clients), ``usage_update`` shows spend against the budget only to
clients that read newer fields (RFC 0039)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.spend._helpers import assert_balanced, text_chunks, tool_reply, write_config
from tests.support.acp_schema import modern_client
from tests.support.editor import EditorClient, read_log, run_editor
from tests.support.provider_server import FakeProvider, Reply
from tests.support.provider_wire import oa_text_reply

PRICED = (
    "providers:\n  openai:\n    context_windows: {priced: 100000}\n"
    "    prices: {priced: {input: 1000000, output: 1000000}}\n"
)
"""``openai:priced`` costs one dollar a token: the figures of a test are its token counts."""
TASK = {"description": "look", "prompt": "look around"}


def _env(server: FakeProvider) -> dict[str, str]:
    return {"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "test"}


def _usage_updates(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [u for u in updates if u.get("sessionUpdate") == "usage_update"]


async def test_a_sub_agents_spend_stops_the_parents_turn(server: FakeProvider, tmp_path: Path) -> None:
    write_config(tmp_path, PRICED + "budget: {session_usd: 15}\n")
    server.script(
        tool_reply("t1", "task", TASK, 2, 1),  # the parent: $3
        Reply(events=oa_text_reply("Found it.", prompt=10, completion=3)),  # the child: $13, $16 of $15 in all
        Reply(events=oa_text_reply("never asked")),
    )
    async with run_editor(tmp_path, "openai:priced", EditorClient([]), env=_env(server)) as editor:
        session = (await editor.new_session()).session_id
        response = await editor.prompt(session, "go")
        assert response.stop_reason == "max_turn_requests"
        meta = response.model_dump(by_alias=True, exclude_none=True)["_meta"]["dsh"]["budget"]
        assert meta["budget"] == "session_usd" and meta["limit"] == 15 and meta["spent"] == 16
        assert "the session budget of $15 was reached ($16 spent)" in text_chunks(editor.updates(session))
        assert editor.final(session, "t1")["status"] == "completed"  # the child finished its step
    assert len(server.requests) == 2  # the parent was not called again
    events = read_log(tmp_path, session)
    assert_balanced(events)
    assert [e["type"] for e in events].count("spend/stop") == 1


async def test_the_warning_is_one_notice_and_usage_update_shows_the_budget_to_a_modern_client(
    server: FakeProvider, tmp_path: Path
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(PRICED + "budget: {session_usd: 100}\n")
    server.script(
        Reply(events=oa_text_reply("one", prompt=80, completion=5)),  # $85: 85 %
        Reply(events=oa_text_reply("two", prompt=3, completion=1)),  # $89: no second warning
    )
    env = {**_env(server), "DSH_CONFIG": str(config)}
    async with modern_client(tmp_path, "openai:priced", env=env) as (client, _):
        session = await client.new_session(tmp_path)
        for text in ("first", "second"):
            answer = await client.prompt(session, text)
            assert answer["result"]["stopReason"] == "end_turn"
        updates = client.updates(session)
    notices = [u for u in updates if u.get("sessionUpdate") == "notice"]
    assert len(notices) == 1, notices
    assert notices[0]["severity"] == "warning" and notices[0]["title"].startswith("85 % of the session budget spent")
    assert "/budget session_usd 200" in notices[0]["description"]
    assert notices[0]["_meta"] == {"dsh": {"source": "budgets"}}
    usages = _usage_updates(updates)
    assert [u["_meta"]["dsh"]["budget"] for u in usages] == [
        {"session_usd": {"limit": 100, "spent": 85}},
        {"session_usd": {"limit": 100, "spent": 89}},
    ]


async def test_an_older_client_gets_the_warning_as_a_message_and_usage_update_unchanged(
    server: FakeProvider, tmp_path: Path
) -> None:
    write_config(tmp_path, PRICED + "budget: {session_usd: 100}\n")
    server.script(Reply(events=oa_text_reply("one", prompt=80, completion=5)))
    async with run_editor(tmp_path, "openai:priced", EditorClient([]), env=_env(server)) as editor:
        session = (await editor.new_session()).session_id
        assert (await editor.prompt(session, "first")).stop_reason == "end_turn"
        updates = editor.updates(session)
    assert "85 % of the session budget spent: $85 of $100" in text_chunks(updates)
    assert not [u for u in updates if u.get("sessionUpdate") == "notice"]
    (usage,) = _usage_updates(updates)
    assert usage == {
        "sessionUpdate": "usage_update",
        "used": 85,
        "size": 100000,
        "cost": {"amount": 85.0, "currency": "USD"},
    }


async def test_a_sub_agent_stops_at_its_own_step_boundary_once_the_parents_budget_is_reached(
    server: FakeProvider, tmp_path: Path
) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "a.txt").write_text("alpha\n")
    write_config(tmp_path, PRICED + "budget: {turn_tokens: 100}\n")
    server.script(
        tool_reply("t1", "task", TASK, 20, 5),
        # the child's first step: 25 + 90 = 115 of 100 tokens: its read is not run, the child stops
        tool_reply("r1", "read_file", {"path": "a.txt"}, 80, 10),
        Reply(events=oa_text_reply("never asked")),
    )
    async with run_editor(tmp_path, "openai:priced", EditorClient([]), env=_env(server)) as editor:
        session = (await editor.new_session()).session_id
        response = await editor.prompt(session, "go")
        assert response.stop_reason == "max_turn_requests"
        assert response.model_dump(by_alias=True, exclude_none=True)["_meta"]["dsh"]["budget"]["spent"] == 115
    assert len(server.requests) == 2
    parent = read_log(tmp_path, session)
    assert_balanced(parent)
    (child_id,) = {e["data"]["session_id"] for e in parent if e["type"] == "subagent/usage"}
    child = read_log(tmp_path, child_id)
    assert_balanced(child)
    (result,) = [e["data"] for e in child if e["type"] == "tool/result"]
    assert result["call_id"] == "r1" and result["error"]["code"] == "BUDGET_REACHED"
    assert [e["type"] for e in child].count("spend/stop") == 1
