"""The permission gate, end to end: the SDK client answers ``session/request_permission`` and the scripted model
calls the built-in tools in the session's project directory (default mode: edits and commands ask).

Granted, denied, "always" answers (remembered in the session, and across a daemon restart through
``session/load``), and a request still pending when the turn is cancelled.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
from acp.schema import PromptResponse

from tests.support.editor import (
    DEADLINE,
    HOLD,
    PERMISSION,
    Editor,
    EditorClient,
    call,
    read_log,
    run_editor,
    text_of,
    tool_results,
    write_script,
)

OPTIONS = ["allow_once", "allow_always", "reject_once", "reject_always"]
REFUSED = "The user does not allow write_file in this session"  # a standing "always reject"
DECLINED = "The user declined this write_file call"  # a one-off "reject"


def permission_frame(editor: Editor, call_id: str) -> tuple[int, dict[str, Any]]:
    """The one ``session/request_permission`` the daemon sent for *call_id*, with its wire position."""
    found = [(i, f) for i, f in editor.daemon_requests(PERMISSION) if f["params"]["toolCall"]["toolCallId"] == call_id]
    assert len(found) == 1, found
    return found[0]


def card_position(editor: Editor, session_id: str, call_id: str, kind: str) -> int:
    positions = [
        i
        for i, update in editor.dsh.update_frames(session_id)
        if update.get("toolCallId") == call_id and update["sessionUpdate"] == kind
    ]
    assert positions, (call_id, kind)
    return positions[0]


async def test_allow_once_writes_the_file_and_the_card_precedes_the_request(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "script.json",
        [call("write_file", "w1", path="src/hello.txt", content="hello\n"), {"text": "written"}],
    )
    client = EditorClient(["allow_once"])
    async with run_editor(tmp_path, model, client) as editor:
        session = (await editor.new_session()).session_id
        response = await editor.prompt(session, "write it")
        target = editor.project / "src" / "hello.txt"

        assert response.stop_reason == "end_turn"
        assert target.read_text(encoding="utf-8") == "hello\n"

        card = editor.tool_updates(session, "w1")[0]
        assert card == {
            "sessionUpdate": "tool_call",
            "toolCallId": "w1",
            "title": "Write src/hello.txt",
            "kind": "edit",
            "status": "pending",  # issue #11: waiting for the permission is pending, not in_progress
            "rawInput": {"path": "src/hello.txt", "content": "hello\n"},
            "locations": [{"path": str(target)}],
        }
        position, request = permission_frame(editor, "w1")
        assert card_position(editor, session, "w1", "tool_call") < position
        params = request["params"]
        assert params["sessionId"] == session
        assert params["toolCall"]["title"] == "Write src/hello.txt"
        assert params["toolCall"]["kind"] == "edit"
        assert [option["optionId"] for option in params["options"]] == OPTIONS
        assert [option["kind"] for option in params["options"]] == OPTIONS

        final = editor.final(session, "w1")
        assert final["sessionUpdate"] == "tool_call_update"
        assert final["status"] == "completed"
        assert {"type": "diff", "path": str(target), "oldText": None, "newText": "hello\n"} in final["content"]
        assert card_position(editor, session, "w1", "tool_call_update") > position
        # pending (card) → request → in_progress (it runs) → completed, in this order on the wire
        statuses = [(i, u["status"]) for i, u in editor.dsh.update_frames(session) if u.get("toolCallId") == "w1"]
        statuses = [(i, status) for i, status in statuses if status is not None]
        assert [status for _, status in statuses] == ["pending", "in_progress", "completed"]
        assert statuses[0][0] < position < statuses[1][0] < statuses[2][0]
        assert editor.client.text(session) == "written"
    assert len(client.permissions()) == 1


async def test_reject_once_does_not_write_and_the_model_is_told(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "script.json",
        [call("write_file", "w1", path="hello.txt", content="hello\n"), {"text": "understood"}],
    )
    client = EditorClient(["reject_once"])
    async with run_editor(tmp_path, model, client) as editor:
        session = (await editor.new_session()).session_id
        response = await editor.prompt(session, "write it")

        assert response.stop_reason == "end_turn"
        assert not (editor.project / "hello.txt").exists()
        final = editor.final(session, "w1")
        assert final["status"] == "failed"
        assert DECLINED in text_of(final)
        assert editor.client.text(session) == "understood"  # the model went on to its next step
    assert len(client.permissions()) == 1
    (result,) = tool_results(read_log(tmp_path, session), "w1")
    assert result["is_error"] is True
    assert DECLINED in result["content"][0]["text"]
    assert not [e for e in read_log(tmp_path, session) if e["type"] == "permission/rule"]


async def test_allow_always_is_remembered_in_the_session_and_after_a_restart(tmp_path: Path) -> None:
    first = write_script(
        tmp_path / "first.json",
        [
            call("write_file", "w1", path="a.txt", content="a\n"),
            call("write_file", "w2", path="b.txt", content="b\n"),
            call("edit_file", "e1", path="a.txt", old_string="a", new_string="A"),
            {"text": "done"},
        ],
    )
    client = EditorClient(["allow_always", "allow_once"])
    async with run_editor(tmp_path, first, client, name="first") as editor:
        session = (await editor.new_session()).session_id
        assert (await editor.prompt(session, "write twice")).stop_reason == "end_turn"
        project = editor.project
        # Asked once for write_file; the rule is per tool and directory (#21), so edit_file still asks.
        assert [p["toolCall"]["toolCallId"] for p in client.permissions()] == ["w1", "e1"]
        for call_id in ("w1", "w2", "e1"):
            assert editor.final(session, call_id)["status"] == "completed"
    assert (project / "a.txt").read_text(encoding="utf-8") == "A\n"
    assert (project / "b.txt").read_text(encoding="utf-8") == "b\n"
    rules = [e["data"] for e in read_log(tmp_path, session) if e["type"] == "permission/rule"]
    assert rules == [{"tool": "write_file", "decision": "allow", "scope": str(project)}]

    second = write_script(
        tmp_path / "second.json", [call("write_file", "w3", path="c.txt", content="c\n"), {"text": "ok"}]
    )
    client = EditorClient([])  # any permission request would fail the test
    async with run_editor(tmp_path, second, client, name="second") as editor:
        await editor.load_session(session)
        assert (await editor.prompt(session, "once more")).stop_reason == "end_turn"
        assert editor.final(session, "w3")["status"] == "completed"
    assert client.permissions() == []
    assert (project / "c.txt").read_text(encoding="utf-8") == "c\n"


async def test_reject_always_refuses_without_asking_again_and_after_a_restart(tmp_path: Path) -> None:
    first = write_script(
        tmp_path / "first.json",
        [
            call("write_file", "w1", path="a.txt", content="a\n"),
            call("write_file", "w2", path="b.txt", content="b\n"),
            {"text": "done"},
        ],
    )
    client = EditorClient(["reject_always"])
    async with run_editor(tmp_path, first, client, name="first") as editor:
        session = (await editor.new_session()).session_id
        assert (await editor.prompt(session, "write twice")).stop_reason == "end_turn"
        project = editor.project
        assert [p["toolCall"]["toolCallId"] for p in client.permissions()] == ["w1"]
        for call_id in ("w1", "w2"):
            final = editor.final(session, call_id)
            assert final["status"] == "failed"
            assert REFUSED in text_of(final)
    assert not (project / "a.txt").exists()
    assert not (project / "b.txt").exists()
    rules = [e["data"] for e in read_log(tmp_path, session) if e["type"] == "permission/rule"]
    assert rules == [{"tool": "write_file", "decision": "reject", "scope": str(project)}]

    second = write_script(
        tmp_path / "second.json", [call("write_file", "w3", path="c.txt", content="c\n"), {"text": "ok"}]
    )
    client = EditorClient([])
    async with run_editor(tmp_path, second, client, name="second") as editor:
        await editor.load_session(session)
        assert (await editor.prompt(session, "once more")).stop_reason == "end_turn"
        final = editor.final(session, "w3")
        assert final["status"] == "failed"
        assert REFUSED in text_of(final)
    assert client.permissions() == []
    assert not (project / "c.txt").exists()


async def test_cancel_while_the_permission_request_is_pending(tmp_path: Path) -> None:
    """The client holds the request; ``session/cancel`` must end the prompt ``cancelled`` anyway, without running
    the tool: the daemon withdraws its request with ``$/cancel_request`` and closes the card ``failed``. The
    session then takes the next prompt (the aborted turn did not consume the script's next step)."""
    model = write_script(
        tmp_path / "script.json",
        [call("write_file", "w1", path="hello.txt", content="hello\n"), {"text": "still here"}],
    )
    client = EditorClient([HOLD])
    answer: list[PromptResponse] = []
    async with run_editor(tmp_path, model, client) as editor:
        session = (await editor.new_session()).session_id

        async def prompt() -> None:
            answer.append(await editor.prompt(session, "write it"))

        with anyio.fail_after(DEADLINE):
            async with anyio.create_task_group() as group:
                group.start_soon(prompt)
                await editor.wait(lambda: client.held == ["w1"])
                await editor.conn.cancel(session_id=session)
        assert answer[0].stop_reason == "cancelled"
        assert not (editor.project / "hello.txt").exists()
        final = editor.final(session, "w1")
        assert final["status"] == "failed"
        _, request = permission_frame(editor, "w1")
        assert editor.cancel_requests() == [request["id"]]

        client.release_held()  # the late "cancelled" answer must not disturb the daemon
        assert (await editor.prompt(session, "are you there")).stop_reason == "end_turn"
        assert editor.client.text(session) == "still here"
    assert not (editor.project / "hello.txt").exists()
    (result,) = tool_results(read_log(tmp_path, session), "w1")
    assert result["is_error"] is True


async def test_allow_always_does_not_cover_paths_outside_the_project(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "script.json",
        [
            call("write_file", "w1", path="a.txt", content="a\n"),
            call("write_file", "w2", path="../outside.txt", content="overwritten\n"),
            {"text": "done"},
        ],
    )
    client = EditorClient(["allow_always", "reject_once"])
    async with run_editor(tmp_path, model, client) as editor:
        session = (await editor.new_session()).session_id
        assert (await editor.prompt(session, "write")).stop_reason == "end_turn"
        assert [p["toolCall"]["toolCallId"] for p in client.permissions()] == ["w1", "w2"]
        assert editor.final(session, "w2")["status"] == "failed"
    assert not (tmp_path / "outside.txt").exists()


async def test_reject_once_is_not_reported_to_the_model_as_a_standing_ban(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "script.json",
        [
            call("write_file", "w1", path="a.txt", content="a\n"),
            call("write_file", "w2", path="b.txt", content="b\n"),
            {"text": "done"},
        ],
    )
    client = EditorClient(["reject_once", "reject_always"])
    async with run_editor(tmp_path, model, client) as editor:
        session = (await editor.new_session()).session_id
        assert (await editor.prompt(session, "write")).stop_reason == "end_turn"
        once, always = text_of(editor.final(session, "w1")), text_of(editor.final(session, "w2"))
    assert once != always
    assert "in this session" not in once
    assert "Do not retry" not in once
