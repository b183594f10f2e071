"""Questions to the user (``ask_user``) and leaving plan mode (``exit_plan_mode``) over ACP, with the SDK client
playing an editor (``tests.support.editor``): elicitation when the client offers it, else a permission request."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.support.editor import (
    ELICIT,
    HOLD,
    PERMISSION,
    EditorClient,
    call,
    read_log,
    run_editor,
    tool_results,
    write_script,
)

WAIT = 15.0


def _result_text(tmp_path: Path, session_id: str, call_id: str) -> str:
    (result,) = tool_results(read_log(tmp_path, session_id), call_id)
    return "".join(block["text"] for block in result["content"])


def _ask(tmp_path: Path, **arguments: object) -> str:
    return write_script(tmp_path / "ask.json", [call("ask_user", "q1", **arguments), {"text": "thanks"}])


async def test_ask_user_through_elicitation_with_choices(tmp_path: Path) -> None:
    model = _ask(tmp_path, question="Which database?", choices=["Postgres", "SQLite"])
    client = EditorClient(elicitations=[("accept", "SQLite")])
    async with run_editor(tmp_path, model, client, elicitation=True) as editor:
        session_id = (await editor.new_session()).session_id
        assert (await editor.prompt(session_id, "set it up")).stop_reason == "end_turn"
    (request,) = client.of_method(ELICIT)
    assert request["message"] == "Which database?" and request["toolCallId"] == "q1"
    assert request["requestedSchema"]["properties"]["answer"]["enum"] == ["Postgres", "SQLite"]
    assert client.permissions() == []
    assert _result_text(tmp_path, session_id, "q1") == "The user answered: SQLite"


async def test_ask_user_free_text_through_elicitation_and_a_declined_question(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "ask.json",
        [call("ask_user", "q1", question="Project name?"), call("ask_user", "q2", question="Again?"), {"text": "ok"}],
    )
    client = EditorClient(elicitations=[("accept", "zebra"), "decline"])
    async with run_editor(tmp_path, model, client, elicitation=True) as editor:
        session_id = (await editor.new_session()).session_id
        assert (await editor.prompt(session_id, "name it")).stop_reason == "end_turn"
    assert "enum" not in client.of_method(ELICIT)[0]["requestedSchema"]["properties"]["answer"]
    assert _result_text(tmp_path, session_id, "q1") == "The user answered: zebra"
    assert _result_text(tmp_path, session_id, "q2").startswith("No answer: the user declined the question.")


async def test_ask_user_falls_back_to_a_permission_request_with_the_choices(tmp_path: Path) -> None:
    model = _ask(tmp_path, question="Which database?", choices=["Postgres", "SQLite"])
    client = EditorClient(answers=["1"])
    async with run_editor(tmp_path, model, client) as editor:
        session_id = (await editor.new_session()).session_id
        assert (await editor.prompt(session_id, "set it up")).stop_reason == "end_turn"
    (request,) = client.permissions()
    assert [(o["optionId"], o["name"]) for o in request["options"]] == [("0", "Postgres"), ("1", "SQLite")]
    assert request["toolCall"]["title"] == "Which database?"
    assert _result_text(tmp_path, session_id, "q1") == "The user answered: SQLite"


async def test_a_free_text_question_without_elicitation_tells_the_model_at_once(tmp_path: Path) -> None:
    model = _ask(tmp_path, question="Project name?")
    client = EditorClient()
    async with run_editor(tmp_path, model, client) as editor:
        session_id = (await editor.new_session()).session_id
        assert (await editor.prompt(session_id, "name it")).stop_reason == "end_turn"
    assert client.permissions() == []
    assert "cannot take a free-text answer" in _result_text(tmp_path, session_id, "q1")


@pytest.mark.parametrize("elicitation", [True, False])
async def test_cancel_while_a_question_is_pending_answers_cancelled_promptly(tmp_path: Path, elicitation: bool) -> None:
    model = _ask(tmp_path, question="Which database?", choices=["Postgres", "SQLite"])
    client = EditorClient(answers=[HOLD], elicitations=[HOLD])
    async with run_editor(tmp_path, model, client, elicitation=elicitation) as editor:
        session_id = (await editor.new_session()).session_id
        method = ELICIT if elicitation else PERMISSION
        stops: list[str] = []
        answered = anyio.Event()
        async with anyio.create_task_group() as group:

            async def send() -> None:
                stops.append((await editor.prompt(session_id, "set it up")).stop_reason)
                answered.set()

            group.start_soon(send)
            await editor.wait(lambda: bool(client.of_method(method)))
            with anyio.fail_after(2.0):
                await editor.conn.cancel(session_id=session_id)
                await answered.wait()
        assert stops == ["cancelled"]
        (request_id,) = [f["id"] for _, f in editor.daemon_requests(method)]
        assert editor.cancel_requests() == [request_id]
        # the SDK client ignores $/cancel_request: let the held request be answered before the pipe closes
        client.release_held()
        with anyio.fail_after(WAIT):
            await editor.dsh.wait_sent(lambda m: m.get("id") == request_id and "method" not in m)
    assert _result_text(tmp_path, session_id, "q1").startswith("No answer: the question was withdrawn")


async def _plan_exit(tmp_path: Path, answer: str) -> tuple[EditorClient, str, list[dict[str, object]]]:
    model = write_script(
        tmp_path / "exit.json",
        [call("exit_plan_mode", "x1", plan="1. Edit\n2. Test"), {"text": "done"}],
    )
    client = EditorClient(answers=[answer])
    async with run_editor(tmp_path, model, client) as editor:
        session_id = (await editor.new_session()).session_id
        await editor.conn.set_session_mode(mode_id="plan", session_id=session_id)
        assert (await editor.prompt(session_id, "plan it")).stop_reason == "end_turn"
        updates = editor.updates(session_id)
    return client, session_id, updates


async def test_exit_plan_mode_switches_the_mode_on_approval(tmp_path: Path) -> None:
    client, session_id, updates = await _plan_exit(tmp_path, "accept-edits")
    (request,) = client.permissions()
    assert request["toolCall"]["kind"] == "switch_mode"
    assert "1. Edit\n2. Test" in request["toolCall"]["title"]
    assert [o["optionId"] for o in request["options"]] == ["default", "accept-edits", "bypass", "stay"]
    modes = [u["currentModeId"] for u in updates if u["sessionUpdate"] == "current_mode_update"]
    assert modes == ["plan", "accept-edits"]
    configs = [u for u in updates if u["sessionUpdate"] == "config_option_update"]
    assert configs[-1]["configOptions"][1]["currentValue"] == "accept-edits"
    assert "the mode is now accept-edits" in _result_text(tmp_path, session_id, "x1")


async def test_exit_plan_mode_stays_in_plan_mode_on_rejection(tmp_path: Path) -> None:
    _, session_id, updates = await _plan_exit(tmp_path, "stay")
    modes = [u["currentModeId"] for u in updates if u["sessionUpdate"] == "current_mode_update"]
    assert modes == ["plan"]
    assert "keep planning" in _result_text(tmp_path, session_id, "x1")
