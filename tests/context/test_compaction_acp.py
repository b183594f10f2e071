"""Compaction over ACP: the user sees a completed ``think`` tool card "Compacted conversation" with the summary,
then ``usage_update`` with the new figure; ``session/load`` replays the same (real daemon, loopback provider)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from tests.context.test_sections import write_config
from tests.support.durable import run_daemon
from tests.support.provider_server import FakeProvider, Reply
from tests.support.provider_wire import oa_text_reply

CONFIG = """\
providers:
  openai:
    context_windows: {test-model: 40000}
compaction:
  keep_recent_turns: 1
system_prompt_sections: {identity: false, tools: false, mode: false, environment: false, instructions: false}
"""


def compaction_updates(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The card and the usage_update right after it."""
    for index, update in enumerate(updates):
        if update.get("title") == "Compacted conversation":
            return updates[index : index + 2]
    return []


async def test_the_card_then_usage_live_and_on_load(server: FakeProvider, tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    write_config(tmp_path, CONFIG)
    server.script(
        Reply(events=oa_text_reply("one", prompt=100, completion=10)),
        Reply(events=oa_text_reply("two", prompt=32100, completion=20)),
        Reply(events=oa_text_reply("Summary of one and two.")),
        Reply(events=oa_text_reply("three", prompt=60, completion=5)),
    )
    env = {"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "test"}
    data = tmp_path / "data"
    async with run_daemon(tmp_path, data, model="openai:test-model", env=env) as daemon:
        with anyio.fail_after(30):
            session = await daemon.start(cwd=tmp_path)
            for text in ("first", "second", "third"):
                assert (await daemon.prompt(session, text)).stop_reason == "end_turn"
        live = compaction_updates(daemon.updates_in(0, session_id=session))
    card, usage = live
    assert card == {
        "sessionUpdate": "tool_call",
        "toolCallId": card["toolCallId"],
        "title": "Compacted conversation",
        "kind": "think",
        "status": "completed",
        "content": [{"type": "content", "content": {"type": "text", "text": "Summary of one and two."}}],
        "rawInput": card["rawInput"],
    }
    assert card["rawInput"]["trigger"] == "threshold" and card["rawInput"]["tokens_before"] > 32100
    assert usage["sessionUpdate"] == "usage_update" and usage["size"] == 40000
    # calibrated: the fake counted 32100 for a request estimated at far less (the ratio is clamped at 4), so the
    # figure after compaction (mostly the built-in tools' schemas, 1,600 to 2,800 estimated tokens) is in that count
    assert usage["used"] == card["rawInput"]["tokens_after"] < 0.5 * 40000
    async with run_daemon(tmp_path, data, model="openai:test-model", env=env, name="dsh2") as daemon:
        with anyio.fail_after(30):
            await daemon.initialize()
            mark = daemon.mark()
            await daemon.load(session, cwd=tmp_path)
            replayed = compaction_updates(daemon.updates_in(mark, session_id=session))
    assert replayed == live


def test_projection_card_or_native_compaction_update() -> None:
    from dsh.frontends.acp._projection import project
    from dsh.services.sessions import SessionEvent

    event = SessionEvent(
        "context/compaction",
        7,
        0.0,
        {"summary": "S.", "upto": 5, "trigger": "manual", "model": "m", "tokens_after": 40, "window": 100},
    )
    usage = {"sessionUpdate": "usage_update", "used": 40, "size": 100}
    assert project(event) == [
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "compaction-7",
            "title": "Compacted conversation",
            "kind": "think",
            "status": "completed",
            "content": [{"type": "content", "content": {"type": "text", "text": "S."}}],
            "rawInput": {"trigger": "manual", "tokens_after": 40, "upto": 5},
        },
        usage,
    ]
    assert project(event, replay=True) == project(event)
    assert project(event, compaction_updates=True) == [
        {"sessionUpdate": "compaction_update", "compactionId": "compaction-7", "status": "completed"},
        {
            "sessionUpdate": "compaction_summary_chunk",
            "compactionId": "compaction-7",
            "content": {"type": "text", "text": "S."},
        },
        usage,
    ]
    unknown_window = SessionEvent("context/compaction", 8, 0.0, {"summary": "S.", "upto": 5, "tokens_after": 40})
    assert [u["sessionUpdate"] for u in project(unknown_window)] == ["tool_call"]


async def test_slash_compact_runs_agent_compact(server: FakeProvider, tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    write_config(tmp_path, CONFIG)
    server.script(
        Reply(events=oa_text_reply("one")),
        Reply(events=oa_text_reply("two")),
        Reply(events=oa_text_reply("Summary of turn one.")),
    )
    env = {"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "test"}
    async with run_daemon(tmp_path, tmp_path / "data", model="openai:test-model", env=env) as daemon:
        with anyio.fail_after(30):
            session = await daemon.start(cwd=tmp_path)
            for text in ("first", "second"):
                assert (await daemon.prompt(session, text)).stop_reason == "end_turn"
            mark = daemon.mark()
            assert (await daemon.prompt(session, "/compact keep the names")).stop_reason == "end_turn"
            updates = daemon.updates_in(mark, session_id=session)
    summary_request = server.bodies()[2]["messages"][1]["content"]
    assert "[user] first" in summary_request and "[user] second" not in summary_request  # keep_recent_turns: 1
    assert summary_request.endswith("The user asks you to focus on: keep the names")
    [card] = [u for u in updates if u.get("title") == "Compacted conversation"]
    assert card["rawInput"]["trigger"] == "manual"
    said = "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk")
    assert said.startswith("Conversation compacted (about ") and said.endswith(" tokens now).")
