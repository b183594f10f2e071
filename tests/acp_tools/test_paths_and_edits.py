"""Paths outside the session's directory (``../``, an absolute path elsewhere, a symlink inside that points out)
need the user's grant: default mode asks (a rejection refuses the call, and the file's content never reaches
the wire), plan mode refuses without asking. And ``edit_file`` on a non-unique match fails with a clear
message."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

from tests.support.editor import EditorClient, call, read_log, run_editor, text_of, tool_results, write_script

ESCAPES = ("up", "absolute", "symlink")


def escape_setup(tmp_path: Path) -> tuple[dict[str, str], str]:
    """Secret files outside the project and the path by which each escape reaches one; returns the paths (by
    call id) and the secret text they hold."""
    secret = f"TOP SECRET {uuid.uuid4().hex}"
    project = tmp_path / "project"
    project.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "outside.txt").write_text(secret + "\n", encoding="utf-8")
    (elsewhere / "secret.txt").write_text(secret + "\n", encoding="utf-8")
    (elsewhere / "linked.txt").write_text(secret + "\n", encoding="utf-8")
    (project / "link.txt").symlink_to(elsewhere / "linked.txt")
    paths = {"up": "../outside.txt", "absolute": str(elsewhere / "secret.txt"), "symlink": "link.txt"}
    return paths, secret


async def test_path_escapes_ask_in_default_mode_and_a_rejection_refuses(tmp_path: Path) -> None:
    paths, secret = escape_setup(tmp_path)
    (tmp_path / "granted.txt").write_text("granted text\n", encoding="utf-8")
    steps = [call("read_file", name, path=paths[name]) for name in ESCAPES]
    steps += [call("read_file", "granted", path="../granted.txt"), {"text": "done"}]
    model = write_script(tmp_path / "script.json", steps)
    client = EditorClient(["reject_once", "reject_once", "reject_once", "allow_once"])
    async with run_editor(tmp_path, model, client) as editor:
        session = (await editor.new_session()).session_id
        assert (await editor.prompt(session, "read them")).stop_reason == "end_turn"
        assert [p["toolCall"]["toolCallId"] for p in client.permissions()] == [*ESCAPES, "granted"]
        for name in ESCAPES:
            final = editor.final(session, name)
            assert final["status"] == "failed", name
            assert "The user declined this read_file call" in text_of(final), name
        # The positive control: the same kind of escape, granted once, reads the file.
        granted = editor.final(session, "granted")
        assert granted["status"] == "completed"
        assert text_of(granted) == "     1\tgranted text"
    assert secret.encode() not in bytes(editor.dsh.stdout)
    events = read_log(tmp_path, session)
    for name in ESCAPES:
        (result,) = tool_results(events, name)
        assert result["is_error"] is True
        assert secret not in result["content"][0]["text"]


async def test_path_escapes_are_refused_without_asking_in_plan_mode(tmp_path: Path) -> None:
    paths, secret = escape_setup(tmp_path)
    steps = [call("read_file", name, path=paths[name]) for name in ESCAPES] + [{"text": "done"}]
    model = write_script(tmp_path / "script.json", steps)
    client = EditorClient([])
    async with run_editor(tmp_path, model, client) as editor:
        session = (await editor.new_session()).session_id
        await editor.conn.set_session_mode(session_id=session, mode_id="plan")
        assert (await editor.prompt(session, "read them")).stop_reason == "end_turn"
        for name in ESCAPES:
            final = editor.final(session, name)
            assert final["status"] == "failed", name
            assert "Plan mode is on" in text_of(final), name
            assert "outside the session's directory" in text_of(final), name
    assert client.permissions() == []
    assert secret.encode() not in bytes(editor.dsh.stdout)


@pytest.mark.parametrize(
    "search",
    [
        pytest.param(
            "ripgrep",
            marks=pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep is not installed"),
        ),
        pytest.param("python"),
    ],
)
async def test_grep_does_not_follow_a_symlink_out_of_the_project(tmp_path: Path, search: str) -> None:
    """A search of the project is allowed without asking; it must not read through a link that points out."""
    _, secret = escape_setup(tmp_path)
    (tmp_path / "project" / "inside.txt").write_text("TOP SECRET is what this line says\n", encoding="utf-8")
    model = write_script(
        tmp_path / "script.json", [call("grep", "g1", pattern="TOP SECRET", output_mode="content"), {"text": "done"}]
    )
    # Without rg on PATH the daemon falls back to its Python search (it needs nothing else from PATH here).
    env = {"PATH": str(tmp_path / "no-bin")} if search == "python" else None
    client = EditorClient([])
    async with run_editor(tmp_path, model, client, env=env) as editor:
        session = (await editor.new_session()).session_id
        assert (await editor.prompt(session, "search")).stop_reason == "end_turn"
        final = editor.final(session, "g1")
        assert final["status"] == "completed"
        assert text_of(final) == "inside.txt:1:TOP SECRET is what this line says"
    assert client.permissions() == []
    assert secret.encode() not in bytes(editor.dsh.stdout)


async def test_edit_file_needs_a_unique_match(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    source = project / "app.py"
    original = "def f():\n    return 1\n\nx = 1\nx = 1\n"
    source.write_text(original, encoding="utf-8")
    model = write_script(
        tmp_path / "script.json",
        [
            call("read_file", "r0", path="app.py"),  # read before write (the read ledger)
            call("edit_file", "e1", path="app.py", old_string="x = 1", new_string="x = 2"),
            call("edit_file", "e2", path="app.py", old_string="return 1", new_string="return 2"),
            {"text": "done"},
        ],
    )
    client = EditorClient([])
    async with run_editor(tmp_path, model, client) as editor:
        session = (await editor.new_session()).session_id
        await editor.conn.set_session_mode(session_id=session, mode_id="bypass")
        assert (await editor.prompt(session, "edit")).stop_reason == "end_turn"

        card = editor.tool_updates(session, "e1")[0]
        assert card["title"] == "Edit app.py"
        assert card["kind"] == "edit"
        assert card["locations"] == [{"path": str(source)}]
        assert card["content"] == [{"type": "diff", "path": str(source), "oldText": "x = 1", "newText": "x = 2"}]
        ambiguous = editor.final(session, "e1")
        assert ambiguous["status"] == "failed"
        assert "old_string matches 2 times in app.py" in text_of(ambiguous)
        assert "replace_all" in text_of(ambiguous)

        edited = editor.final(session, "e2")
        assert edited["status"] == "completed"
        new = original.replace("return 1", "return 2")
        assert {"type": "diff", "path": str(source), "oldText": original, "newText": new} in edited["content"]
        assert edited["locations"] == [{"path": str(source), "line": 2}]
    assert source.read_text(encoding="utf-8") == original.replace("return 1", "return 2")
