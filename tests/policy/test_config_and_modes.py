"""The ``permissions:`` section (validated with its line; a deny pattern refuses without asking, over the wire),
and ``exit_plan_mode`` offered to the model in plan mode only (the request captured at a loopback provider)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from dsh.config import ConfigError, load_config
from tests.support.editor import EditorClient, call, read_log, run_editor, text_of, tool_results, write_script
from tests.support.provider_server import Reply, serve
from tests.support.provider_wire import oa_text_reply
from tests.support.sdk import run_dsh

WAIT = 15.0


def test_the_section_is_validated_with_the_line_of_each_bad_pattern(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(
        "permissions:\n  mode: accept-edits\n  allow: ['run_command(npm test:*)', 'edit_file(src/**)']\n"
        "  deny: [read_file(.env)]\n",
        encoding="utf-8",
    )
    loaded = load_config(good).permissions
    assert (loaded.mode, loaded.allow, loaded.deny) == (
        "accept-edits",
        ["run_command(npm test:*)", "edit_file(src/**)"],
        ["read_file(.env)"],
    )
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "model: echo\npermissions:\n  mode: yolo\n  deny:\n    - 'run_command('\n  allwo: []\n", encoding="utf-8"
    )
    with pytest.raises(ConfigError) as caught:
        load_config(bad)
    message = str(caught.value)
    assert "line 3: permissions.mode" in message and "unknown mode 'yolo'" in message
    assert "line 5: permissions.deny" in message and "not a permission pattern" in message
    assert "permissions.allwo" in message
    checked = subprocess.run(
        [sys.executable, "-m", "dsh", "config", "check", "--config", str(bad)], capture_output=True, text=True
    )
    assert checked.returncode == 1 and "not a permission pattern" in checked.stderr


async def test_a_deny_pattern_refuses_without_asking(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "permissions:\n  deny: ['run_command(git push)', 'read_file(*.env)']\n  allow: ['run_command(git)']\n",
        encoding="utf-8",
    )
    project = tmp_path / "project"
    project.mkdir()
    (project / "prod.env").write_text("KEY=1\n", encoding="utf-8")
    model = write_script(
        tmp_path / "script.json",
        [
            call("run_command", "c1", command="git status && git push origin main"),
            call("read_file", "r1", path="prod.env"),
            {"text": "ok"},
        ],
    )
    client = EditorClient([])  # nothing may ask
    async with run_editor(tmp_path, model, client, project=project, env={"DSH_CONFIG": str(config)}) as editor:
        session = (await editor.new_session()).session_id
        assert (await editor.prompt(session, "push")).stop_reason == "end_turn"
        for call_id, pattern in (("c1", "run_command(git push)"), ("r1", "read_file(*.env)")):
            final = editor.final(session, call_id)
            assert final["status"] == "failed"
            assert f"denied by the permissions configuration (`{pattern}`)" in text_of(final)
    assert client.permissions() == []
    (result,) = tool_results(read_log(tmp_path, session), "r1")
    assert result["error"]["code"] == "PERMISSION_DENIED"
    assert "KEY=1" not in str(result)


def tool_names(body: Any) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools") or []]


def system_text(body: Any) -> str:
    return "\n".join(m["content"] for m in body["messages"] if m["role"] == "system" and isinstance(m["content"], str))


async def test_exit_plan_mode_is_offered_in_every_mode_and_the_mode_is_told_as_a_message(tmp_path: Path) -> None:
    """Issue 35 (superseding #21's "plan mode only"): the tool list and the system prompt stay byte-identical
    across mode switches (a changed prefix would make every switch pay the cached conversation again); each
    switch reaches the model as a note after the message that follows it."""
    with serve() as server:
        server.script(*(Reply(events=oa_text_reply(f"answer {n}")) for n in range(5)))
        env = {"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "test"}
        async with run_dsh(tmp_path, "openai:gpt-4.1", env=env) as daemon:
            with anyio.fail_after(WAIT):
                await daemon.initialize()
                session_id = (await daemon.conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
                for mode in ("default", "plan", "accept-edits", "bypass", "plan"):
                    await daemon.conn.set_session_mode(session_id=session_id, mode_id=mode)
                    assert (await daemon.prompt(session_id, mode)).stop_reason == "end_turn"
        bodies = server.bodies()
    assert len(bodies) == 5
    offered = [("exit_plan_mode" in tool_names(body), "- exit_plan_mode:" in system_text(body)) for body in bodies]
    assert offered == [(True, True)] * 5
    assert len({system_text(body) for body in bodies}) == 1 and len({str(body["tools"]) for body in bodies}) == 1
    notes = [
        m["content"]
        for m in bodies[-1]["messages"]
        if m["role"] == "user"
        and isinstance(m["content"], str)
        and m["content"].startswith('<context source="session">')
    ]
    said = [note.split("session to " if "switched" in note else "session is in ")[1].split(":")[0] for note in notes]
    assert said == ["Default", "Plan", "Accept edits", "Bypass permissions", "Plan"]  # each switch, told once
    assert all("read_file" in tool_names(body) for body in bodies)
