"""Issue #11: ``additionalDirectories`` on session/new (and load) become roots of the session: its tools read
there without a permission prompt, as in the cwd. Without them the same read asks (the control case)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from acp import RequestError

from tests.support.editor import EditorClient, call, run_editor, text_of
from tests.support.env import write_script

WAIT = 20


async def test_additional_directories_are_readable_without_a_permission_prompt(tmp_path: Path) -> None:
    other = tmp_path / "other-root"
    other.mkdir()
    notes = other / "notes.txt"
    notes.write_text("from the other root\n", encoding="utf-8")
    model = write_script(
        tmp_path / "script.json",
        [
            call("read_file", "r1", path=str(notes)),
            {"text": "read it"},
            call("read_file", "r2", path=str(notes)),
            {"text": "asked"},
        ],
    )
    client = EditorClient(["reject_once"])
    async with run_editor(tmp_path, model, client) as editor:
        with anyio.fail_after(WAIT):
            session = (
                await editor.dsh.conn.new_session(
                    cwd=str(editor.project), mcp_servers=[], additional_directories=[str(other)]
                )
            ).session_id
            assert (await editor.prompt(session, "read the notes")).stop_reason == "end_turn"
        read = editor.final(session, "r1")
        assert read["status"] == "completed"
        assert "from the other root" in text_of(read)
        assert client.permissions() == []

        with anyio.fail_after(WAIT):  # control: a session without the root is asked (and refused here)
            plain = (await editor.new_session()).session_id
            assert (await editor.prompt(plain, "read the notes")).stop_reason == "end_turn"
        assert editor.final(plain, "r2")["status"] == "failed"
        assert len(client.permissions()) == 1


async def test_a_relative_additional_directory_is_invalid_params(tmp_path: Path) -> None:
    model = write_script(tmp_path / "script.json", [{"text": "unused"}])
    async with run_editor(tmp_path, model, EditorClient([])) as editor:
        with anyio.fail_after(WAIT), pytest.raises(RequestError) as caught:
            await editor.dsh.conn.new_session(
                cwd=str(editor.project), mcp_servers=[], additional_directories=["rel/dir"]
            )
        assert caught.value.code == -32602
        assert "additionalDirectories" in str(caught.value)


async def test_the_capability_is_advertised(tmp_path: Path) -> None:
    from tests.support.sdk import run_dsh

    async with run_dsh(tmp_path) as dsh:
        with anyio.fail_after(WAIT):
            init = await dsh.initialize()
    caps = init.agent_capabilities
    assert caps is not None and caps.session_capabilities is not None
    assert caps.session_capabilities.additional_directories is not None
