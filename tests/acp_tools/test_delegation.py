"""Editor delegation: with ``fs.readTextFile`` / ``fs.writeTextFile`` advertised, the tools read the editor's
(unsaved) buffers and write through the editor, never the disk; with ``terminal`` advertised, ``run_command``
runs in an editor terminal (create → wait_for_exit → output → release, kill on cancel) whose id the card
embeds; without it, the command runs locally."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from acp.schema import PromptResponse

from dsh.sandbox import support
from tests.support.editor import (
    DEADLINE,
    EditorClient,
    FakeTerminal,
    call,
    read_log,
    run_editor,
    text_of,
    tool_results,
    write_script,
)

TERMINAL_METHODS = ("terminal/create", "terminal/wait_for_exit", "terminal/output", "terminal/kill", "terminal/release")


async def test_fs_delegation_reads_unsaved_buffers_and_writes_through_the_editor(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    notes, out = project / "notes.txt", project / "out.txt"
    notes.write_text("saved disk content\n", encoding="utf-8")
    model = write_script(
        tmp_path / "script.json",
        [
            call("read_file", "r1", path="notes.txt"),
            call("write_file", "w1", path="out.txt", content="from the agent\n"),
            call("edit_file", "e1", path="notes.txt", old_string="unsaved", new_string="edited"),
            {"text": "done"},
        ],
    )
    client = EditorClient(["allow_once", "allow_once"], buffers={str(notes): "unsaved buffer content\n"})
    async with run_editor(tmp_path, model, client, fs=True) as editor:
        session = (await editor.new_session()).session_id
        assert (await editor.prompt(session, "go")).stop_reason == "end_turn"

        read = editor.final(session, "r1")
        assert read["status"] == "completed"
        assert text_of(read) == "     1\tunsaved buffer content"
        write = editor.final(session, "w1")
        assert write["status"] == "completed"
        assert {"type": "diff", "path": str(out), "oldText": None, "newText": "from the agent\n"} in write["content"]
        edit = editor.final(session, "e1")
        assert edit["status"] == "completed"
        assert {
            "type": "diff",
            "path": str(notes),
            "oldText": "unsaved buffer content\n",
            "newText": "edited buffer content\n",
        } in edit["content"]

        reads = client.of_method("fs/read_text_file")
        # read_file, then edit_file's prepare and its apply's "changed since" check; the new out.txt is not read
        # first (#11), neither by prepare nor by apply's check
        assert [r["path"] for r in reads] == [str(notes), str(notes), str(notes)]
        assert all(r["sessionId"] == session for r in reads)
        assert client.of_method("fs/write_text_file") == [
            {"sessionId": session, "path": str(out), "content": "from the agent\n"},
            {"sessionId": session, "path": str(notes), "content": "edited buffer content\n"},
        ]
    # The daemon itself never touched the disk: the editor holds both changes.
    assert notes.read_text(encoding="utf-8") == "saved disk content\n"
    assert not out.exists()
    (result,) = tool_results(read_log(tmp_path, session), "r1")
    assert result["content"] == [{"type": "text", "text": "     1\tunsaved buffer content"}]


@pytest.mark.parametrize(("exit_code", "status"), [(0, "completed"), (3, "failed")])
async def test_terminal_delegation(tmp_path: Path, exit_code: int, status: str) -> None:
    model = write_script(tmp_path / "script.json", [call("run_command", "c1", command="make test"), {"text": "done"}])
    terminal = FakeTerminal(output="hi from the editor\n", exit_code=exit_code)
    client = EditorClient(["allow_once"], terminal=terminal)
    async with run_editor(tmp_path, model, client, terminal=True) as editor:
        session = (await editor.new_session()).session_id
        assert (await editor.prompt(session, "test it")).stop_reason == "end_turn"

        terminal_calls = [c for c in client.calls if c.method.startswith("terminal/")]
        assert [c.method for c in terminal_calls] == [
            "terminal/create",
            "terminal/wait_for_exit",
            "terminal/output",
            "terminal/release",
        ]
        create = terminal_calls[0].params
        assert create == {
            "sessionId": session,
            "command": create["command"],
            "args": create["args"],
            "cwd": str(editor.project),
            "outputByteLimit": create["outputByteLimit"],
        }
        if support().available:  # an approved command runs confined: the terminal runs dsh's sandbox launcher first
            assert create["command"] == sys.executable
            assert create["args"][:5] == ["-m", "dsh.sandbox", "--level", "workspace-write", "--tmp"]
            assert create["args"][-4:] == ["--", "bash", "-c", "make test"]
        else:
            assert (create["command"], create["args"]) == ("bash", ["-c", "make test"])
        assert create["outputByteLimit"] > 0
        assert all(c.params == {"sessionId": session, "terminalId": "term-1"} for c in terminal_calls[1:])

        embed = {"type": "terminal", "terminalId": "term-1"}
        updates = editor.tool_updates(session, "c1")
        assert updates[0]["title"] == "Run make test"
        assert updates[0]["kind"] == "execute"
        live = [u for u in updates if u.get("content") == [embed] and "status" not in u]
        assert len(live) == 1, updates
        # The card shows the terminal before the daemon waits on it.
        positions = [i for i, u in editor.dsh.update_frames(session) if u.get("content") == [embed]]
        (wait_at, _), *_ = editor.daemon_requests("terminal/wait_for_exit")
        assert positions[0] < wait_at
        final = editor.final(session, "c1")
        assert final["status"] == status
        assert embed in final["content"]
        assert text_of(final) == f"hi from the editor\n[exit code: {exit_code}]"
    assert not (editor.project / "Makefile").exists()


async def test_terminal_delegation_cancel_kills_then_releases(tmp_path: Path) -> None:
    model = write_script(tmp_path / "script.json", [call("run_command", "c1", command="sleep 60")])
    terminal = FakeTerminal(output="partial\n", runs_until_killed=True)
    client = EditorClient([], terminal=terminal)
    answer: list[PromptResponse] = []
    async with run_editor(tmp_path, model, client, terminal=True) as editor:
        session = (await editor.new_session()).session_id
        await editor.conn.set_session_mode(session_id=session, mode_id="bypass")

        async def prompt() -> None:
            answer.append(await editor.prompt(session, "sleep"))

        with anyio.fail_after(DEADLINE):
            async with anyio.create_task_group() as group:
                group.start_soon(prompt)
                await editor.wait(lambda: "terminal/wait_for_exit" in client.methods())
                await editor.conn.cancel(session_id=session)
        assert answer[0].stop_reason == "cancelled"
        assert [m for m in client.methods() if m in TERMINAL_METHODS] == [
            "terminal/create",
            "terminal/wait_for_exit",
            "terminal/kill",
            "terminal/output",
            "terminal/release",
        ]
        (_, wait), *_ = editor.daemon_requests("terminal/wait_for_exit")
        assert wait["id"] in editor.cancel_requests()  # the daemon stopped waiting and said so
        final = editor.final(session, "c1")
        assert final["status"] == "failed"


async def test_terminal_delegation_timeout_kills_then_releases(tmp_path: Path) -> None:
    """``terminal/wait_for_exit`` is raced against the command's timeout: on expiry kill, output, release."""
    model = write_script(
        tmp_path / "script.json", [call("run_command", "c1", command="sleep 60", timeout=0.2), {"text": "done"}]
    )
    terminal = FakeTerminal(output="partial\n", runs_until_killed=True)
    client = EditorClient(["allow_once"], terminal=terminal)
    async with run_editor(tmp_path, model, client, terminal=True) as editor:
        session = (await editor.new_session()).session_id
        assert (await editor.prompt(session, "sleep")).stop_reason == "end_turn"
        assert [m for m in client.methods() if m in TERMINAL_METHODS] == [
            "terminal/create",
            "terminal/wait_for_exit",
            "terminal/kill",
            "terminal/output",
            "terminal/release",
        ]
        final = editor.final(session, "c1")
        assert final["status"] == "failed"
        assert final["content"][0] == {"type": "terminal", "terminalId": "term-1"}
        assert text_of(final).startswith("partial\n[timed out after 0.2 s: the command and the processes it started")
        assert "larger timeout (up to 600)" in text_of(final) and "background: true" in text_of(final)


async def test_without_terminal_capability_the_command_runs_locally(tmp_path: Path) -> None:
    model = write_script(tmp_path / "script.json", [call("run_command", "c1", command="echo hi"), {"text": "done"}])
    client = EditorClient(["allow_once"])
    async with run_editor(tmp_path, model, client) as editor:
        session = (await editor.new_session()).session_id
        assert (await editor.prompt(session, "say hi")).stop_reason == "end_turn"
        final = editor.final(session, "c1")
        assert final["status"] == "completed"
        assert text_of(final) == "hi\n[exit code: 0]"
        for update in editor.tool_updates(session, "c1"):
            assert all(entry["type"] != "terminal" for entry in update.get("content") or [])
    assert [p["toolCall"]["title"] for p in client.permissions()] == ["Run echo hi"]
    assert not [c for c in client.calls if c.method.startswith("terminal/")]
