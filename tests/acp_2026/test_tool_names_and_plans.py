"""Tool-call names and plan operations (issue 36 items 2 and 4, RFC 0033), over real pipes with a client of our own:
``name`` on every ``tool_call`` / ``tool_call_update`` and ``plan_update`` / ``plan_removed`` for a client that
advertises the newer capabilities, exactly today's frames for one that advertises none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.acp_schema import ModernClient, modern_client
from tests.support.editor import call
from tests.support.env import write_script

PLAN = "# Plan\n\n1. Read the notes\n2. Write the summary\n"


def _steps() -> list[dict[str, Any]]:
    return [
        call("read_file", "r1", path="notes.txt"),
        call("update_plan", "p1", entries=[{"content": "Read the notes", "status": "in_progress"}]),
        call(
            "update_plan",
            "p2",
            entries=[
                {"content": "Read the notes", "status": "completed"},
                {"content": "Write the summary", "status": "pending", "priority": "high"},
            ],
        ),
        call("update_plan", "p3", entries=[]),
        {"text": "read it"},
        call("exit_plan_mode", "x1", plan=PLAN),
        {"text": "planned"},
    ]


def _answer_default(asked: list[dict[str, Any]]) -> Any:
    async def handler(method: str, params: dict[str, Any]) -> Any:
        assert method == "session/request_permission", method
        asked.append(params)
        return {"outcome": {"outcome": "selected", "optionId": "default"}}

    return handler


def _tool_updates(client: ModernClient, session: str) -> list[dict[str, Any]]:
    return [u for u in client.updates(session) if u["sessionUpdate"] in ("tool_call", "tool_call_update")]


async def _run(client: ModernClient, tmp_path: Path) -> str:
    session = await client.new_session(tmp_path)
    assert (await client.prompt(session, "read"))["result"]["stopReason"] == "end_turn"
    await client.call("session/set_mode", {"sessionId": session, "modeId": "plan"})
    assert (await client.prompt(session, "plan it"))["result"]["stopReason"] == "end_turn"
    return session


async def test_a_modern_client_gets_names_plan_updates_and_the_plan_once(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("notes\n")
    model = write_script(tmp_path / "script.json", _steps())
    asked: list[dict[str, Any]] = []
    async with modern_client(tmp_path, model, handler=_answer_default(asked)) as (client, _):
        session = await _run(client, tmp_path)
        cards = _tool_updates(client, session)
        assert cards and all("name" in card for card in cards), cards
        by_call = {card["toolCallId"]: card["name"] for card in cards}
        assert by_call == {
            "r1": "read_file",
            "p1": "update_plan",
            "p2": "update_plan",
            "p3": "update_plan",
            "x1": "exit_plan_mode",
        }
        (read,) = [c for c in cards if c["toolCallId"] == "r1" and c["sessionUpdate"] == "tool_call"]
        assert read["title"] == "Read notes.txt"  # the title stays human
        plans = [u for u in client.updates(session) if u["sessionUpdate"].startswith("plan")]
        assert [u["sessionUpdate"] for u in plans] == ["plan_update", "plan_update", "plan_removed", "plan_update"]
        assert plans[0]["plan"] == {
            "type": "items",
            "planId": "checklist",
            "entries": [{"content": "Read the notes", "status": "in_progress", "priority": "medium"}],
        }
        assert plans[1]["plan"]["planId"] == "checklist" and len(plans[1]["plan"]["entries"]) == 2
        assert plans[2] == {"sessionUpdate": "plan_removed", "planId": "checklist", "_session": session}
        assert plans[3]["plan"] == {"type": "markdown", "planId": "plan-mode", "content": PLAN.strip()}
        # the plan is rendered once: the question names it instead of repeating it, and comes after it
        (question,) = asked
        assert question["toolCall"]["title"] == "Ready to code? The plan is shown above."
        assert question["toolCall"]["_meta"] == {"dsh": {"planId": "plan-mode"}}
        order = [m for m in client.messages if m.get("method") in ("session/update", "session/request_permission")]
        markdown_at = next(
            i for i, m in enumerate(order) if m["params"].get("update", {}).get("plan", {}).get("type") == "markdown"
        )
        asked_at = next(i for i, m in enumerate(order) if m["method"] == "session/request_permission")
        assert markdown_at < asked_at
        live = [
            u
            for u in client.updates(session)
            if u["sessionUpdate"] in ("plan_update", "plan_removed", "tool_call", "tool_call_update")
        ]
        await client.call("session/close", {"sessionId": session})
        mark = len(client.messages)
        await client.call("session/load", {"sessionId": session, "cwd": str(tmp_path), "mcpServers": []})
        replayed = [
            u
            for u in client.updates(session, since=mark)
            if u["sessionUpdate"] in ("plan_update", "plan_removed", "tool_call", "tool_call_update")
        ]
        assert replayed == live  # names and plans replay exactly as they went out live


async def test_a_client_without_capabilities_gets_todays_frames(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("notes\n")
    model = write_script(tmp_path / "script.json", _steps())
    asked: list[dict[str, Any]] = []
    async with modern_client(tmp_path, model, {}, handler=_answer_default(asked)) as (client, _):
        session = await _run(client, tmp_path)
        cards = _tool_updates(client, session)
        assert cards and not [card for card in cards if "name" in card]
        kinds = [u["sessionUpdate"] for u in client.updates(session)]
        assert "plan_update" not in kinds and "plan_removed" not in kinds
        plans = [u for u in client.updates(session) if u["sessionUpdate"] == "plan"]
        assert [len(u["entries"]) for u in plans] == [1, 2, 0]
        (question,) = asked
        assert question["toolCall"]["title"].startswith("Ready to code? Here is the plan:\n\n# Plan")
        assert "_meta" not in question["toolCall"]


def test_names_follow_a_call_from_its_card_to_its_result_for_any_tool() -> None:
    """MCP tools and sub-agents go through the same projection as dsh's own: the catalogue name on every update
    of the call, forgotten once its result went out (a replay that starts empty names the same)."""
    from dsh.frontends.acp._features import ClientFeatures
    from dsh.frontends.acp._projection import failed_update, project
    from dsh.services.sessions import SessionEvent

    names: dict[str, str] = {}
    features = ClientFeatures(notices=True)
    call_event = SessionEvent("tool/call", 1, 0.0, {"call_id": "m1", "name": "mcp__files__stat", "arguments": "{}"})
    (card,) = project(call_event, features=features, names=names)
    assert card["name"] == "mcp__files__stat" and card["title"] == "mcp__files__stat"
    (running,) = project(SessionEvent("tool/running", 2, 0.0, {"call_id": "m1"}), features=features, names=names)
    assert running["name"] == "mcp__files__stat"
    result = SessionEvent("tool/result", 3, 0.0, {"call_id": "m1", "content": [], "is_error": False})
    (done,) = project(result, features=features, names=names)
    assert done["name"] == "mcp__files__stat" and names == {}
    project(SessionEvent("tool/call", 4, 0.0, {"call_id": "k", "name": "task", "arguments": "{}"}), names=names)
    assert failed_update("k", "Cancelled by the user.", names)["name"] == "task" and names == {}
    assert "name" not in project(call_event)[0]  # no names asked for: today's card
