"""Session modes: offered as ACP ``modes`` and as the config option of category ``mode``, switched with
``session/set_mode`` or ``session/set_config_option`` (each sends ``current_mode_update``), and what each mode
lets the tools do without asking (default asks before edits and commands, accept-edits only before commands,
plan refuses edits and commands, bypass never asks)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from acp import RequestError

from tests.support.editor import (
    Editor,
    EditorClient,
    call,
    run_editor,
    text_of,
    write_script,
)

MODE_IDS = ["default", "accept-edits", "plan", "bypass"]
INVALID_PARAMS = -32602


def session_result(editor: Editor, session_id: str) -> dict[str, Any]:
    """The raw ``session/new`` result that created *session_id*."""
    results = [
        f["result"]
        for f in editor.frames()
        if isinstance(f.get("result"), dict) and f["result"].get("sessionId") == session_id
    ]
    assert len(results) == 1
    result: dict[str, Any] = results[0]
    return result


def mode_updates(editor: Editor, session_id: str) -> list[dict[str, Any]]:
    return [u for u in editor.updates(session_id) if u["sessionUpdate"] == "current_mode_update"]


def request_id(editor: Editor, method: str, index: int = -1) -> Any:
    return [m["id"] for m in editor.dsh.sent if m.get("method") == method and "id" in m][index]


async def set_mode(editor: Editor, session_id: str, mode: str) -> None:
    """``session/set_mode``; its ``current_mode_update`` must come before the (empty) answer."""
    before = len(mode_updates(editor, session_id))
    await editor.conn.set_session_mode(session_id=session_id, mode_id=mode)
    await editor.wait(lambda: len(mode_updates(editor, session_id)) > before)
    assert mode_updates(editor, session_id)[before:] == [
        {"sessionUpdate": "current_mode_update", "currentModeId": mode}
    ]
    update_at = [i for i, u in editor.dsh.update_frames(session_id) if u["sessionUpdate"] == "current_mode_update"][
        before
    ]
    answer_at = editor.dsh.response_index(request_id(editor, "session/set_mode"))
    assert update_at < answer_at
    assert editor.frames()[answer_at]["result"] == {}


async def test_session_new_offers_the_modes_and_rejects_unknown_ones(tmp_path: Path) -> None:
    async with run_editor(tmp_path, "echo", EditorClient()) as editor:
        session = (await editor.new_session()).session_id
        result = session_result(editor, session)
        modes = result["modes"]
        assert modes["currentModeId"] == "default"
        assert [m["id"] for m in modes["availableModes"]] == MODE_IDS
        assert all(m["name"] for m in modes["availableModes"])
        (option,) = [o for o in result["configOptions"] if o.get("category") == "mode"]
        assert option["id"] == "mode"
        assert option["type"] == "select"
        assert option["currentValue"] == "default"
        assert [o["value"] for o in option["options"]] == MODE_IDS

        with pytest.raises(RequestError) as by_mode:
            await editor.conn.set_session_mode(session_id=session, mode_id="yolo")
        assert by_mode.value.code == INVALID_PARAMS
        with pytest.raises(RequestError) as by_option:
            await editor.conn.set_config_option(config_id="mode", session_id=session, value="yolo")
        assert by_option.value.code == INVALID_PARAMS
        assert mode_updates(editor, session) == []

        # Still in default mode: re-selecting the model answers the whole list, the mode's value unchanged.
        response = await editor.conn.set_config_option(config_id="model", session_id=session, value="echo")
        assert [o.current_value for o in response.config_options if o.id == "mode"] == ["default"]
        assert mode_updates(editor, session) == []


async def test_set_config_option_switches_the_mode(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "script.json",
        [call("write_file", "w1", path="plan.txt", content="no\n"), {"text": "ok"}],
    )
    async with run_editor(tmp_path, model, EditorClient()) as editor:
        new = await editor.new_session()
        session = new.session_id
        response = await editor.conn.set_config_option(config_id="mode", session_id=session, value="plan")
        await editor.wait(lambda: len(mode_updates(editor, session)) == 1)
        assert mode_updates(editor, session) == [{"sessionUpdate": "current_mode_update", "currentModeId": "plan"}]

        answer_at = editor.dsh.response_index(request_id(editor, "session/set_config_option"))
        options = editor.frames()[answer_at]["result"]["configOptions"]
        offered = session_result(editor, session)["configOptions"]
        assert [o["id"] for o in options] == [o["id"] for o in offered]  # the complete list, in the same order
        for before, after in zip(offered, options, strict=True):
            expected = dict(before, currentValue="plan") if before["id"] == "mode" else before
            assert after == expected
        assert [o.current_value for o in response.config_options if o.id == "mode"] == ["plan"]

        assert (await editor.prompt(session, "write")).stop_reason == "end_turn"
        final = editor.final(session, "w1")
        assert final["status"] == "failed"
        assert "Plan mode" in text_of(final)
    assert not (editor.project / "plan.txt").exists()


async def test_accept_edits_runs_edits_without_asking_but_commands_still_ask(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "script.json",
        [
            call("write_file", "w1", path="a.txt", content="one\n"),
            call("edit_file", "e1", path="a.txt", old_string="one", new_string="two"),
            call("run_command", "c1", command="echo ran"),
            {"text": "done"},
        ],
    )
    client = EditorClient(["allow_once"])
    async with run_editor(tmp_path, model, client) as editor:
        session = (await editor.new_session()).session_id
        await set_mode(editor, session, "accept-edits")
        assert (await editor.prompt(session, "go")).stop_reason == "end_turn"
        assert [p["toolCall"]["toolCallId"] for p in client.permissions()] == ["c1"]
        for call_id in ("w1", "e1", "c1"):
            assert editor.final(session, call_id)["status"] == "completed"
        assert "ran" in text_of(editor.final(session, "c1"))
    assert (editor.project / "a.txt").read_text(encoding="utf-8") == "two\n"


async def test_plan_mode_refuses_edits_and_commands_without_asking_but_reads(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "script.json",
        [
            call("read_file", "r1", path="notes.txt"),  # first: an edit of an unread file fails before the mode
            call("write_file", "w1", path="new.txt", content="new\n"),
            call("edit_file", "e1", path="notes.txt", old_string="draft", new_string="final"),
            call("run_command", "c1", command="touch ran.txt"),
            call("grep", "g1", pattern="draft", output_mode="content"),
            {"text": "here is my plan"},
        ],
    )
    client = EditorClient([])
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("draft notes\n", encoding="utf-8")
    async with run_editor(tmp_path, model, client) as editor:
        session = (await editor.new_session()).session_id
        await set_mode(editor, session, "plan")
        assert (await editor.prompt(session, "plan it")).stop_reason == "end_turn"
        for call_id in ("w1", "e1", "c1"):
            final = editor.final(session, call_id)
            assert final["status"] == "failed", call_id
            assert "Plan mode is on" in text_of(final), call_id
        read = editor.final(session, "r1")
        assert read["status"] == "completed"
        assert "draft notes" in text_of(read)
        search = editor.final(session, "g1")
        assert search["status"] == "completed"
        assert text_of(search) == "notes.txt:1:draft notes"
    assert client.permissions() == []
    assert not (project / "new.txt").exists()
    assert not (project / "ran.txt").exists()
    assert (project / "notes.txt").read_text(encoding="utf-8") == "draft notes\n"


async def test_bypass_mode_never_asks(tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("outside text\n", encoding="utf-8")
    model = write_script(
        tmp_path / "script.json",
        [
            call("write_file", "w1", path="a.txt", content="one\n"),
            call("edit_file", "e1", path="a.txt", old_string="one", new_string="two"),
            call("run_command", "c1", command="echo ran > ran.txt"),
            call("read_file", "r1", path="../outside.txt"),
            {"text": "done"},
        ],
    )
    client = EditorClient([])
    async with run_editor(tmp_path, model, client) as editor:
        session = (await editor.new_session()).session_id
        await set_mode(editor, session, "bypass")
        assert (await editor.prompt(session, "go")).stop_reason == "end_turn"
        for call_id in ("w1", "e1", "c1", "r1"):
            assert editor.final(session, call_id)["status"] == "completed", call_id
        assert "outside text" in text_of(editor.final(session, "r1"))
    assert client.permissions() == []
    assert (editor.project / "a.txt").read_text(encoding="utf-8") == "two\n"
    assert (editor.project / "ran.txt").read_text(encoding="utf-8") == "ran\n"
