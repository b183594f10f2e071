"""Issue 39 over the wire: a real ``dsh acp`` daemon with ``lsp: {enabled: true}`` and a real language server
(``pylsp`` with pyflakes, from the dev extra), driven by the ACP SDK client, the model played by the loopback
provider. What the model receives is read from the requests the provider captured."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.checkpoints.test_rewind_acp import env_of, said, text, tool
from tests.support.editor import EditorClient, run_editor, text_of
from tests.support.provider_server import FakeProvider

MODEL = "openai:test-model"

pytest.importorskip("pylsp")
pytest.importorskip("pyflakes")


def write_config(tmp_path: Path, **lsp: Any) -> Path:
    config = tmp_path / "config.yaml"
    section = {
        "enabled": True,
        "timeout": 30,  # generous on a busy machine: the bound is the configuration's
        "start_wait": 30,  # the first edit waits for the cold server (the default does not: RFC 0037)
        "servers": {"pylsp": {"command": [sys.executable, "-m", "pylsp"], "languages": ["python"]}},
        **lsp,
    }
    config.write_text(json.dumps({"lsp": section}))  # JSON is YAML
    return config


def lsp_env(tmp_path: Path, **lsp: Any) -> dict[str, str]:
    """The daemon's environment entries for these tests: the configuration of :func:`write_config`, and
    ``DSH_LSP`` emptied (the suite's shared daemon environment sets it to ``off``; empty: as the file says)."""
    return {"DSH_CONFIG": str(write_config(tmp_path, **lsp)), "DSH_LSP": ""}


def tool_message(bodies: list[Any], call_id: str) -> str:
    """The text the model was sent as the result of *call_id* (the first request that carried it)."""
    for body in bodies:
        for message in body.get("messages", ()):
            if message.get("role") == "tool" and message.get("tool_call_id") == call_id:
                content = message["content"]
                return content if isinstance(content, str) else "".join(part.get("text", "") for part in content)
    raise AssertionError(f"no request carried the result of {call_id}")


def servers_in(project: Path, marker: bytes = b"pylsp") -> list[int]:
    """Pids of live processes whose command line holds *marker* (``pylsp``; ``ruff\0server``: NUL-separated
    arguments) and whose working directory is *project*."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            cwd = os.readlink(f"/proc/{entry}/cwd")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and cwd == str(project) and state != "Z":
            found.append(int(entry))
    return found


async def gone(project: Path) -> None:
    """Until no pylsp server of *project* is left (hang detection, not a timed assert)."""
    with anyio.fail_after(30):
        while servers_in(project):  # noqa: ASYNC110 - another process: no event to wait on, so poll, bounded
            await anyio.sleep(0.05)


async def test_undefined_name_is_reported_its_fix_reports_none_and_the_tool_agrees(
    server: FakeProvider, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    server.script(
        tool("w1", "write_file", path="mod.py", content="import os\n\nprint(undefined_thing)\n"),
        tool("d1", "diagnostics", path="mod.py"),
        tool("e2", "edit_file", path="mod.py", old_string="print(undefined_thing)", new_string="print(os.sep)"),
        tool("d2", "diagnostics"),
        tool("w3", "write_file", path="notes.txt", content="not a language a server knows\n"),
        text("done"),
    )
    env = {**env_of(server), **lsp_env(tmp_path)}
    client = EditorClient([])
    async with run_editor(tmp_path, MODEL, client, env=env, project=project) as editor:
        session = (await editor.new_session()).session_id
        await editor.conn.set_session_mode(session_id=session, mode_id="accept-edits")
        with anyio.fail_after(120):
            assert (await editor.prompt(session, "write it")).stop_reason == "end_turn"
        card = editor.final(session, "w1")  # the edit's card: its diff and the result's text, diagnostics included
        assert card["content"][0]["type"] == "diff"
        assert "undefined name 'undefined_thing'" in text_of(card)
        assert servers_in(project), "the pylsp server should be running while the daemon lives"
        (project / "other.py").write_text("print(nowhere)\n")
        since = len(editor.updates(session))
        with anyio.fail_after(60):
            await editor.prompt(session, "/diagnostics other.py")
        assert "other.py:1: error: undefined name 'nowhere' [pyflakes] (pylsp)" in said(editor, session, since)
    bodies = server.bodies()
    broke = tool_message(bodies, "w1")
    assert "New diagnostics in mod.py (pylsp):" in broke
    assert "line 3: error: undefined name 'undefined_thing' [pyflakes]" in broke
    fixed = tool_message(bodies, "e2")
    assert "diagnostics" not in fixed.lower()
    assert "undefined" not in fixed.split("\n")[-1]
    assert "diagnostics" not in tool_message(bodies, "w3").lower()
    assert "mod.py:3: error: undefined name 'undefined_thing' [pyflakes] (pylsp)" in tool_message(bodies, "d1")
    assert tool_message(bodies, "d2").startswith("No diagnostics known")
    await gone(project)  # daemon EOF: the server is gone
