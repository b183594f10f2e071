"""Native sub-agent sessions (issue 36 item 1, RFC 0033): a client that advertises ``subagents`` sees each ``task``
child as a session of its own, announced on the parent, its permission requests on its own session, cancelled
with its parent, replayed by ``session/load`` of the parent exactly as it went out live; a client without the
capability keeps today's cards on the parent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from tests.support.acp_schema import ModernClient, modern_client
from tests.support.editor import call
from tests.support.env import write_script
from tests.support.subagent_tools import PLUGIN

REPLAYED = frozenset(
    {
        "agent_message_chunk",
        "agent_thought_chunk",
        "tool_call",
        "tool_call_update",
        "plan_update",
        "plan_removed",
        "subagent_update",
        "session_message",
        "session_message_chunk",
    }
)
"""The updates a load replays (live-only ones: usage, titles, commands; the user's own messages are replay-only)."""


def _task(call_id: str, prompt: str) -> dict[str, Any]:
    return {
        "tool_calls": [
            {
                "name": "task",
                "arguments": {"description": "write out", "prompt": prompt, "agent": "general"},
                "id": call_id,
            }
        ]
    }


def _frames(client: ModernClient, since: int = 0) -> list[tuple[str, dict[str, Any]]]:
    """(session, update) of every replayable update from message *since*, without the live-only work-state flips
    of a permission request (``requires_action`` and the ``running`` after it)."""
    found = []
    for update in client.updates(since=since):
        if update["sessionUpdate"] not in REPLAYED:
            continue
        state = update.get("state", {}).get("state") if update["sessionUpdate"] == "subagent_update" else None
        if state == "requires_action" or (state == "running" and "title" not in update):
            continue
        session = update.pop("_session")
        found.append((session, update))
    return found


def _write_script(tmp_path: Path) -> str:
    """Parent → task t1 (general) → the child writes out.txt (asks in default mode) and reports → the parent ends."""
    steps = [
        _task("t1", "write out.txt"),
        call("write_file", "w1", path="out.txt", content="x\n"),
        {"text": "wrote it"},
        {"text": "all done"},
    ]
    return write_script(tmp_path / "script.json", steps)


def _per_session(frames: list[tuple[str, dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    sessions: dict[str, list[dict[str, Any]]] = {}
    for session, update in frames:
        sessions.setdefault(session, []).append(update)
    return sessions


async def test_a_child_is_its_own_session_asks_there_and_replays_as_it_went_out(tmp_path: Path) -> None:
    model = _write_script(tmp_path)
    asked: list[dict[str, Any]] = []

    async def handler(method: str, params: dict[str, Any]) -> Any:
        assert method == "session/request_permission"
        asked.append(params)
        return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}

    async with modern_client(tmp_path, model, handler=handler, plugins=PLUGIN) as (client, _):
        parent = await client.new_session(tmp_path)
        start = len(client.messages)
        assert (await client.prompt(parent, "go"))["result"]["stopReason"] == "end_turn"
        assert (tmp_path / "out.txt").read_text() == "x\n"
        announcements = [u for u in client.updates(parent) if u["sessionUpdate"] == "subagent_update"]
        child = announcements[0]["sessionId"]
        assert child.startswith("task-")
        assert announcements[0]["title"] == "general: write out"
        assert announcements[0]["state"] == {"state": "running"}
        assert announcements[0]["capabilities"] == {"cancel": {}}
        assert announcements[0]["_meta"]["dsh"]["parentToolCallId"] == "t1"
        # nothing names the child before its announcement
        first_mention = next(i for i, m in enumerate(client.messages[start:]) if child in str(m))
        assert client.messages[start + first_mention]["params"]["update"]["sessionUpdate"] == "subagent_update"
        # the parent's task card links the child; no child card is repeated on the parent
        link = [u for u in client.updates(parent) if u.get("toolCallId") == "t1" and u.get("content")]
        assert link[0]["content"] == [{"type": "session", "sessionId": child}]
        assert link[0]["name"] == "task"
        cards = [u for u in client.updates(parent) if u["sessionUpdate"] in ("tool_call", "tool_call_update")]
        assert {u["toolCallId"] for u in cards} == {"t1"}
        # the prompt is a message from the parent to the child (both views), the child's work is the child's
        child_updates = client.updates(child)
        assert child_updates[0]["sessionUpdate"] == "session_message"
        assert child_updates[0]["senderSessionId"] == parent and child_updates[0]["recipientSessionId"] == child
        assert child_updates[1] == {
            "sessionUpdate": "session_message_chunk",
            "messageId": child_updates[0]["messageId"],
            "content": {"type": "text", "text": "write out.txt"},
            "_session": child,
        }
        (card,) = [u for u in child_updates if u["sessionUpdate"] == "tool_call"]
        assert card["toolCallId"] == "w1" and card["name"] == "write_file" and card["title"] == "Write out.txt"
        assert [u["status"] for u in child_updates if u.get("toolCallId") == "w1"][-1] == "completed"
        text = "".join(u["content"]["text"] for u in child_updates if u["sessionUpdate"] == "agent_message_chunk")
        assert text == "wrote it"
        # the permission request came on the child's session, the parent saw the child wait for it
        (question,) = asked
        assert question["sessionId"] == child and question["toolCall"]["toolCallId"] == "w1"
        states = [u["state"]["state"] for u in client.updates(parent) if u["sessionUpdate"] == "subagent_update"]
        assert states == ["running", "requires_action", "running", "idle"]
        (idle,) = [u for u in announcements if u["state"]["state"] == "idle"]
        assert idle["state"]["stopReason"] == "end_turn"
        report = [u for u in client.updates(parent) if u["sessionUpdate"] == "session_message_chunk"]
        assert [u["content"]["text"] for u in report] == ["write out.txt", "wrote it"]  # the prompt out, the report in
        # a child takes no requests; the listing hides it
        refused = await client.prompt(child, "hi")
        assert refused["error"]["code"] == -32602 and "sub-agent of session" in refused["error"]["message"]
        listed = await client.call("session/list", {})
        assert [s["sessionId"] for s in listed["sessions"]] == [parent]
        live = _per_session(_frames(client, start))
        assert set(live) == {parent, child}
        await client.call("session/close", {"sessionId": parent})
        mark = len(client.messages)
        await client.call("session/load", {"sessionId": parent, "cwd": str(tmp_path), "mcpServers": []})
        replayed = _frames(client, mark)
        assert _per_session(replayed) == live  # each session's updates exactly as they went out live
        announced_at = next(i for i, (s, u) in enumerate(replayed) if u["sessionUpdate"] == "subagent_update")
        assert all(s == parent for s, _ in replayed[:announced_at])  # children after their announcement
        again = await client.prompt(child, "hi")
        assert again["error"]["code"] == -32602 and "not running" in again["error"]["message"]
        opened = await client.request("session/load", {"sessionId": child, "cwd": str(tmp_path), "mcpServers": []})
        assert opened["error"]["code"] == -32602 and "sub-agent of session" in opened["error"]["message"]


async def test_cancelling_the_parent_cancels_the_child_and_says_so(tmp_path: Path) -> None:
    model = write_script(tmp_path / "script.json", [_task("t1", "wait"), call("block", "k")])
    async with modern_client(tmp_path, model, plugins=PLUGIN) as (client, _):
        parent = await client.new_session(tmp_path)
        await client.call("session/set_mode", {"sessionId": parent, "modeId": "bypass"})
        rid = await client.send_request(
            "session/prompt", {"sessionId": parent, "prompt": [{"type": "text", "text": "go"}]}
        )

        def blocking(message: dict[str, Any]) -> bool:
            update = message.get("params", {}).get("update", {})
            return update.get("toolCallId") == "k" and update.get("status") == "in_progress"

        running = await client.wait_for(blocking)
        child = running["params"]["sessionId"]
        assert child.startswith("task-")  # the child's call, on the child's session
        await client.notify("session/cancel", {"sessionId": parent})
        with anyio.fail_after(30):
            response = await client.response(rid)
        assert response["result"]["stopReason"] == "cancelled"
        states = [u["state"] for u in client.updates(parent) if u["sessionUpdate"] == "subagent_update"]
        assert states[-1]["state"] == "idle" and states[-1]["stopReason"] == "cancelled"
        assert [u["status"] for u in client.updates(child) if u.get("toolCallId") == "k"][-1] in ("completed", "failed")


async def test_without_the_capability_the_parent_card_shows_the_child_as_before(tmp_path: Path) -> None:
    model = _write_script(tmp_path)

    async def allow(method: str, params: dict[str, Any]) -> Any:
        return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}

    async with modern_client(tmp_path, model, {}, handler=allow, plugins=PLUGIN) as (client, _):
        parent = await client.new_session(tmp_path)
        assert (await client.prompt(parent, "go"))["result"]["stopReason"] == "end_turn"
        sessions = {m["params"]["sessionId"] for m in client.messages if m.get("method") == "session/update"}
        assert sessions == {parent}
        kinds = {u["sessionUpdate"] for u in client.updates(parent)}
        assert not kinds & {"subagent_update", "session_message", "session_message_chunk"}
        mirrored = [
            u for u in client.updates(parent) if u.get("_meta", {}).get("dsh", {}).get("parentToolCallId") == "t1"
        ]
        assert any(u["toolCallId"].endswith("/w1") for u in mirrored)
        progress = [u for u in client.updates(parent) if u.get("toolCallId") == "t1" and u.get("content")]
        assert progress and all(c["type"] == "content" for u in progress for c in u["content"])
        requests = [m for m in client.messages if m.get("method") == "session/request_permission"]
        assert [r["params"]["sessionId"] for r in requests] == [parent]
