"""The tool call pipeline over the wire (issue #21): the official ACP SDK client against ``dsh acp`` with the
scripted model, in default mode.

* A call that cannot apply fails in prepare: no ``session/request_permission``, an error result.
* The permission request shows what will happen: ``write_file`` carries the new file's content, or the
  overwrite's old and new text; ``edit_file`` the whole file before and after.
* Apply runs what was approved, or nothing: a file changed while the user was being asked is not overwritten.
* Commands: the read-only set runs without asking; compound commands, redirections and substitutions ask;
  "always allow" records the command's prefix, never the whole tool.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.support.editor import (
    DEADLINE,
    HOLD,
    PERMISSION,
    EditorClient,
    call,
    read_log,
    run_editor,
    text_of,
    tool_results,
    write_script,
)


def permission_ids(client: EditorClient) -> list[str]:
    return [p["toolCall"]["toolCallId"] for p in client.permissions()]


async def test_an_edit_that_cannot_apply_fails_before_anyone_is_asked(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "m.py").write_text("x = 1\ny = 1\ny = 1\n", encoding="utf-8")
    model = write_script(
        tmp_path / "script.json",
        [
            call("read_file", "r1", path="m.py"),  # edits of existing files follow a read (#22)
            call("edit_file", "e1", path="m.py", old_string="absent", new_string="z"),
            call("edit_file", "e2", path="m.py", old_string="y = 1", new_string="y = 2"),  # ambiguous
            call("edit_file", "e3", path="missing.py", old_string="a", new_string="b"),
            call("write_file", "w1", path="m.py"),  # invalid arguments: no content
            {"text": "done"},
        ],
    )
    client = EditorClient([])  # any permission request fails the test
    async with run_editor(tmp_path, model, client, project=project) as editor:
        session = (await editor.new_session()).session_id
        assert (await editor.prompt(session, "edit")).stop_reason == "end_turn"
        codes = {}
        for call_id in ("e1", "e2", "e3", "w1"):
            final = editor.final(session, call_id)
            assert final["status"] == "failed"
            (result,) = tool_results(read_log(tmp_path, session), call_id)
            assert result["is_error"] is True
            codes[call_id] = (result.get("error") or {}).get("code")
        assert "old_string not found" in text_of(editor.final(session, "e1"))
    assert codes == {"e1": "NO_MATCH", "e2": "AMBIGUOUS_MATCH", "e3": "NOT_FOUND", "w1": "INVALID_ARGUMENTS"}
    assert client.permissions() == []
    assert (project / "m.py").read_text(encoding="utf-8") == "x = 1\ny = 1\ny = 1\n"


async def test_the_permission_request_carries_the_prepared_diff(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "old.txt").write_text("before\n", encoding="utf-8")
    (project / "m.py").write_text("a = 1\nb = 2\n", encoding="utf-8")
    model = write_script(
        tmp_path / "script.json",
        [
            call("read_file", "r1", path="old.txt"),  # edits of existing files follow a read (#22)
            call("read_file", "r2", path="m.py"),
            call("write_file", "w1", path="new.txt", content="fresh\n"),
            call("write_file", "w2", path="old.txt", content="after\n"),
            call("edit_file", "e1", path="m.py", old_string="b = 2", new_string="b = 3"),
            {"text": "done"},
        ],
    )
    client = EditorClient(["allow_once", "allow_once", "allow_once"])
    async with run_editor(tmp_path, model, client, project=project) as editor:
        session = (await editor.new_session()).session_id
        assert (await editor.prompt(session, "write")).stop_reason == "end_turn"
        new, old, edit = (frame["params"]["toolCall"] for _, frame in editor.daemon_requests(PERMISSION))
    assert new["content"] == [{"type": "diff", "path": str(project / "new.txt"), "oldText": None, "newText": "fresh\n"}]
    assert new["locations"] == [{"path": str(project / "new.txt")}]
    assert old["content"] == [
        {"type": "diff", "path": str(project / "old.txt"), "oldText": "before\n", "newText": "after\n"}
    ]
    assert edit["content"] == [
        {"type": "diff", "path": str(project / "m.py"), "oldText": "a = 1\nb = 2\n", "newText": "a = 1\nb = 3\n"}
    ]
    assert (project / "m.py").read_text(encoding="utf-8") == "a = 1\nb = 3\n"
    assert (project / "old.txt").read_text(encoding="utf-8") == "after\n"


async def test_a_file_changed_while_the_user_was_asked_is_not_overwritten(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    target = project / "m.py"
    target.write_text("a = 1\n", encoding="utf-8")
    model = write_script(
        tmp_path / "script.json",
        [
            call("read_file", "r1", path="m.py"),  # edits of existing files follow a read (#22)
            call("edit_file", "e1", path="m.py", old_string="a = 1", new_string="a = 2"),
            call("write_file", "w1", path="n.py", content="n = 1\n"),
            {"text": "done"},
        ],
    )

    def meanwhile(request: Any) -> None:  # the user (or a formatter) saves the files while the request is shown
        if request.tool_call.tool_call_id == "e1":
            target.write_text("a = 1\nb = 1\n", encoding="utf-8")
        else:
            (project / "n.py").write_text("mine\n", encoding="utf-8")

    client = EditorClient(["allow_once", "allow_once"], on_permission=meanwhile)
    async with run_editor(tmp_path, model, client, project=project) as editor:
        session = (await editor.new_session()).session_id
        assert (await editor.prompt(session, "edit")).stop_reason == "end_turn"
        for call_id in ("e1", "w1"):
            final = editor.final(session, call_id)
            assert final["status"] == "failed"
            assert "since this call was prepared" in text_of(final)
            (result,) = tool_results(read_log(tmp_path, session), call_id)
            assert result["error"]["code"] == "CHANGED_SINCE"
    assert target.read_text(encoding="utf-8") == "a = 1\nb = 1\n"
    assert (project / "n.py").read_text(encoding="utf-8") == "mine\n"


async def test_commands_ask_by_what_they_run(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "x").mkdir()
    commands = {
        "c1": "ls -la",
        "c2": "git status",
        "c3": "ls && rm -rf x",
        "c4": "echo hi > f",
        "c5": "$(rm x)",
        "c6": "cat a | grep b; find . -name '*.py'",
        "c7": "find . -delete",
    }
    model = write_script(
        tmp_path / "script.json",
        [*(call("run_command", call_id, command=command) for call_id, command in commands.items()), {"text": "ok"}],
    )
    client = EditorClient(["reject_once"] * 4)
    async with run_editor(tmp_path, model, client, project=project) as editor:
        session = (await editor.new_session()).session_id
        assert (await editor.prompt(session, "run")).stop_reason == "end_turn"
    assert permission_ids(client) == ["c3", "c4", "c5", "c7"]
    assert (project / "x").is_dir() and not (project / "f").exists()
    options = {p["toolCall"]["toolCallId"]: [o["name"] for o in p["options"]] for p in client.permissions()}
    assert options["c3"] == ["Allow", "Always allow `rm`", "Reject", "Always reject `rm`"]
    assert options["c5"] == ["Allow", "Reject"]  # not a plain command: nothing to remember


async def test_always_allow_records_the_command_prefix_not_the_tool(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "script.json",
        [
            call("run_command", "c1", command="npm test"),
            call("run_command", "c2", command="rm -rf build"),
            call("run_command", "c3", command="npm test -- -k x"),
            call("run_command", "c4", command="npm testing"),
            {"text": "ok"},
        ],
    )
    client = EditorClient(["allow_always", "reject_once", "reject_once"])
    async with run_editor(tmp_path, model, client) as editor:
        session = (await editor.new_session()).session_id
        assert (await editor.prompt(session, "run")).stop_reason == "end_turn"
        first = client.permissions()[0]
        assert [o["name"] for o in first["options"]][1] == "Always allow `npm test`"
    assert permission_ids(client) == ["c1", "c2", "c4"]
    rules = [e["data"] for e in read_log(tmp_path, session) if e["type"] == "permission/rule"]
    assert rules == [{"tool": "run_command", "decision": "allow", "scope": "npm test"}]


async def test_a_cancelled_answer_after_session_cancel_is_the_protocol_working(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue #29 item 6: after ``session/cancel`` the client answers its pending permission request ``cancelled``
    (as ACP requires): no warning in the log, no ``$/cancel_request`` for the answered request, the official SDK
    client (in this process) logs no error, the tool does not run, the prompt ends ``cancelled`` and the session
    takes the next prompt."""
    caplog.set_level(logging.WARNING)
    model = write_script(
        tmp_path / "script.json",
        [call("write_file", "w1", path="hello.txt", content="hello\n"), {"text": "still here"}],
    )
    client = EditorClient([HOLD])
    answer: list[Any] = []
    async with run_editor(tmp_path, model, client) as editor:
        session = (await editor.new_session()).session_id

        async def prompt() -> None:
            answer.append(await editor.prompt(session, "write it"))

        with anyio.fail_after(DEADLINE):
            async with anyio.create_task_group() as group:
                group.start_soon(prompt)
                await editor.wait(lambda: client.held == ["w1"])
                await editor.conn.cancel(session_id=session)
                # the client's required answer comes a moment after its cancel (an editor closes the dialog): this
                # is latency, not synchronisation; the daemon must wait for it rather than withdraw the request
                await anyio.sleep(0.1)
                client.release_held()
        assert answer[0].stop_reason == "cancelled"
        assert editor.final(session, "w1")["status"] == "failed"
        assert editor.cancel_requests() == []
        assert (await editor.prompt(session, "are you there")).stop_reason == "end_turn"
        log = editor.dsh.stderr()
    assert "unknown request" not in log
    assert "warning" not in log.lower(), log
    assert not (editor.project / "hello.txt").exists()
    client_errors = [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.levelno >= logging.ERROR]
    assert client_errors == []
