"""Language servers run at the sandbox level of approved commands and without provider keys (issue 39, RFC 0028):
a real daemon with real Landlock, a probing server configured in ``lsp.servers``; what the server could do comes
back as its diagnostic, in the result the model receives (captured at the loopback provider)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import pytest

from dsh.sandbox import support
from tests.checkpoints.test_rewind_acp import env_of, text, tool
from tests.lsp.test_diagnostics_wire import MODEL, lsp_env, tool_message
from tests.support.editor import EditorClient, run_editor
from tests.support.provider_server import FakeProvider

FAKE = Path(__file__).with_name("fake_server.py")

pytestmark = pytest.mark.skipif(not support().available, reason=f"no OS sandbox here: {support().why}")


def probing(tmp_path: Path, mode: str, **lsp: object) -> tuple[Path, Path, dict[str, str]]:
    """A project holding the fake server (the sandbox lets a server read its workspace and the toolchain, not the
    test's directory), a directory outside it, and the daemon's environment naming that server."""
    project = tmp_path / "project"
    project.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(FAKE, project / "server.py")
    command = [sys.executable, str(project / "server.py"), mode, str(outside)]
    servers = {"probe": {"command": command, "languages": ["python"]}}
    return project, outside, lsp_env(tmp_path, servers=servers, **lsp)


@pytest.mark.parametrize("network", [False, True])
async def test_a_server_cannot_write_outside_the_workspace_nor_see_a_provider_key(
    network: bool, server: FakeProvider, tmp_path: Path
) -> None:
    """Without network by default (``lsp.network: true``: as approved commands, here with network)."""
    project, outside, env = probing(tmp_path, "probe", **({"network": True} if network else {}))
    env["LSP_PROBE_PORT"] = str(urlsplit(server.url).port)  # the loopback provider: something to connect to
    server.script(tool("w1", "write_file", path="mod.py", content="x = 1\n"), text("done"))
    async with run_editor(tmp_path, MODEL, EditorClient([]), env={**env_of(server), **env}, project=project) as editor:
        session = (await editor.new_session()).session_id
        await editor.conn.set_session_mode(session_id=session, mode_id="accept-edits")
        with anyio.fail_after(120):
            assert (await editor.prompt(session, "write it")).stop_reason == "end_turn"
    assert env_of(server)["OPENAI_API_KEY"]  # the daemon had the key; the server did not
    said = tool_message(server.bodies(), "w1")
    net = "open" if network else "cut"
    assert f"line 1: error: outside=denied inside=wrote key=absent net={net} [probe]" in said
    assert list(outside.iterdir()) == []
    assert list(project.glob("probe-*.txt"))  # it ran, in the workspace


async def test_a_server_the_sandbox_breaks_is_one_line_and_the_edit_stands(
    server: FakeProvider, tmp_path: Path
) -> None:
    project, outside, env = probing(tmp_path, "strict")
    server.script(
        tool("w1", "write_file", path="mod.py", content="x = 1\n"),
        tool("w2", "write_file", path="mod.py", content="x = 2\n"),
        text("done"),
    )
    async with run_editor(tmp_path, MODEL, EditorClient([]), env={**env_of(server), **env}, project=project) as editor:
        session = (await editor.new_session()).session_id
        await editor.conn.set_session_mode(session_id=session, mode_id="accept-edits")
        with anyio.fail_after(120):
            assert (await editor.prompt(session, "write it")).stop_reason == "end_turn"
    assert (project / "mod.py").read_text() == "x = 2\n"
    bodies = server.bodies()
    # the tool's own text, then one block: the one line
    note = "(language server probe failed to start: language server probe exited)"
    assert tool_message(bodies, "w1") == "Created mod.py (1 line, 6 bytes)." + note
    assert "probe" not in tool_message(bodies, "w2")  # said once, not per edit
    assert list(outside.iterdir()) == []
