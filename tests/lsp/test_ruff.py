"""A second real language server (issue 39): ``ruff server`` (the dev extra's ruff), found on its own by the
default configuration (``enabled: auto``) beside dsh's Python, started by the model's read of a Python file in a
project, reporting an undefined name in the result the model receives; not started for a directory that is not a
project; and configured by hand (``lsp.servers`` with ``init_options``)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import anyio
import pytest

from dsh.lsp import LspConfig
from dsh.lsp._manager import LspManager
from tests.checkpoints.test_rewind_acp import env_of, text, tool
from tests.lsp.test_diagnostics_wire import MODEL, servers_in, tool_message
from tests.support.editor import EditorClient, run_editor
from tests.support.provider_server import FakeProvider

RUFF = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
pytestmark = pytest.mark.skipif(RUFF is None, reason="ruff (the dev extra) is not installed")


def ruff_servers(directory: Path) -> list[int]:
    """Pids of live ``ruff server`` processes working in *directory*."""
    return servers_in(directory, b"ruff\0server")


async def test_ruff_is_found_warmed_by_a_read_and_reports_an_undefined_name(
    server: FakeProvider, tmp_path: Path
) -> None:
    project, loose = tmp_path / "project", tmp_path / "project-less"
    project.mkdir()
    loose.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'demo'\nversion = '0'\n")
    (project / "mod.py").write_text("import os\n\nprint(os.sep)\n")
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps({"lsp": {"timeout": 30, "start_wait": 30}}))  # bounds for a busy machine only
    env = {**env_of(server), "DSH_CONFIG": str(config), "DSH_LSP": ""}  # enabled: the default (auto)
    server.script(
        tool("r1", "read_file", path="mod.py"),
        text("read"),
        tool("e1", "edit_file", path="mod.py", old_string="print(os.sep)", new_string="print(nowhere)"),
        text("edited"),
    )
    async with run_editor(tmp_path, MODEL, EditorClient([]), env=env, project=project) as editor:
        session = (await editor.new_session()).session_id
        await editor.conn.set_session_mode(session_id=session, mode_id="accept-edits")
        with anyio.fail_after(120):
            assert (await editor.prompt(session, "read it")).stop_reason == "end_turn"
            while not ruff_servers(project):  # noqa: ASYNC110 - another process: poll, bounded (hang detection)
                await anyio.sleep(0.05)
            assert (await editor.prompt(session, "edit it")).stop_reason == "end_turn"
        assert ruff_servers(project)
        assert not ruff_servers(loose)
    said = tool_message(server.bodies(), "e1")
    assert "New diagnostics in mod.py (ruff):" in said
    assert "line 3: error: Undefined name `nowhere` [Ruff F821]" in said
    assert "diagnostics" not in tool_message(server.bodies(), "r1").lower()  # a read is not diagnosed


async def test_no_server_for_a_directory_that_is_not_a_project(server: FakeProvider, tmp_path: Path) -> None:
    loose = tmp_path / "loose"
    loose.mkdir()
    env = {**env_of(server), "DSH_LSP": "auto"}
    server.script(tool("w1", "write_file", path="mod.py", content="print(nowhere)\n"), text("done"))
    async with run_editor(tmp_path, MODEL, EditorClient([]), env=env, project=loose) as editor:
        session = (await editor.new_session()).session_id
        await editor.conn.set_session_mode(session_id=session, mode_id="accept-edits")
        with anyio.fail_after(120):
            assert (await editor.prompt(session, "write it")).stop_reason == "end_turn"
        assert not ruff_servers(loose)
    assert tool_message(server.bodies(), "w1") == "Created mod.py (1 line, 15 bytes)."


async def test_ruff_configured_by_hand_with_its_initialization_options(tmp_path: Path) -> None:
    assert RUFF is not None
    servers = {
        "my-ruff": {
            "command": [RUFF, "server"],
            "languages": ["python"],
            "init_options": {"settings": {"lint": {"select": ["F", "T20"]}}},  # print() flagged (T201)
        }
    }
    lsp = LspManager(LspConfig.model_validate({"timeout": 30, "severity": "warning", "servers": servers}))
    path = str(tmp_path / "mod.py")
    (tmp_path / ".git").mkdir()
    try:
        with anyio.fail_after(60):
            report = await lsp.after_edit([(path, "x = 1\n", "x = 1\nprint(x)\n")], str(tmp_path), "s1")
    finally:
        await lsp.aclose()
    assert report.checked == [(path, "my-ruff")], report.notes
    (found,) = report.new
    assert (found.line, found.severity, found.source) == (2, 2, "Ruff T201")
    assert found.message.startswith("`print` found")  # then ruff's hint, on the same line (its wording may vary)
    assert "\n" not in found.message
