"""``delete_file`` on near-miss input, over the wire: what cannot be deleted fails before anyone is asked and
says why; a path outside the session's directory asks, and its content never reaches the editor before a grant."""

from __future__ import annotations

from pathlib import Path

from tests.checkpoints.test_rewind_acp import env_of, text, tool
from tests.support.editor import EditorClient, read_log, run_editor, tool_results
from tests.support.provider_server import FakeProvider

MODEL = "openai:test-model"


async def test_near_misses_fail_before_asking_and_an_outside_path_asks_without_its_content(
    server: FakeProvider, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    (project / "real.py").write_text("real\n")
    (project / "link.py").symlink_to(project / "real.py")
    secret = "OUTSIDE SECRET 1234"
    (tmp_path / "outside.txt").write_text(secret + "\n")
    server.script(
        tool("d1", "delete_file", path="missing.py"),
        tool("d2", "delete_file", path="sub"),
        tool("d3", "delete_file", path="link.py"),
        tool("d4", "delete_file", path="../outside.txt"),
        text("done"),
    )
    client = EditorClient(["reject_once"])
    async with run_editor(tmp_path, MODEL, client, env=env_of(server)) as editor:
        session = (await editor.new_session()).session_id
        assert (await editor.prompt(session, "delete them")).stop_reason == "end_turn"
        assert [p["toolCall"]["toolCallId"] for p in client.permissions()] == ["d4"]
        asked = client.permissions()[0]["toolCall"]
        assert not [c for c in asked.get("content") or () if c.get("type") == "diff"]
    assert secret.encode() not in bytes(editor.dsh.stdout)
    events = read_log(tmp_path, session)
    codes = {}
    for call_id in ("d1", "d2", "d3", "d4"):
        (result,) = tool_results(events, call_id)
        assert result["is_error"] is True, call_id
        codes[call_id] = (result.get("error") or {}).get("code")
    assert codes == {"d1": "NOT_FOUND", "d2": "IS_DIRECTORY", "d3": "NOT_A_FILE", "d4": "PERMISSION_DENIED"}
    assert "nothing was deleted" in tool_results(events, "d3")[0]["content"][0]["text"]
    assert (project / "sub").is_dir() and (project / "link.py").is_symlink() and (project / "real.py").exists()
    assert (tmp_path / "outside.txt").read_text() == secret + "\n"
    assert not [e for e in events if e["type"] == "checkpoint/file"]  # nothing ran, nothing was checkpointed
