"""Language servers end with their sessions and with the daemon (issue 39): gone after ``session/close`` and
after ``kill -9`` of the daemon (daemon EOF: ``test_diagnostics_wire``). Real daemon, real ``pylsp``."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.lsp.test_diagnostics_wire import gone, lsp_env, servers_in
from tests.support.durable import WAIT, Daemon, run_daemon
from tests.support.editor import call
from tests.support.env import write_script

pytest.importorskip("pylsp")


async def started(tmp_path: Path, daemon: Daemon, project: Path) -> str:
    await daemon.initialize()
    with anyio.fail_after(WAIT):
        session = (await daemon.conn.new_session(cwd=str(project), mcp_servers=[])).session_id
        await daemon.conn.set_session_mode(session_id=session, mode_id="accept-edits")
    assert (await daemon.prompt(session, "write it")).stop_reason == "end_turn"
    assert servers_in(project), "the edit of a Python file should have started pylsp"
    return session


def scripted(tmp_path: Path) -> tuple[Path, str, dict[str, str]]:
    project = tmp_path / "project"
    project.mkdir()
    model = write_script(
        tmp_path / "script.json", [call("write_file", "w1", path="mod.py", content="x = 1\n"), {"text": "done"}]
    )
    return project, model, lsp_env(tmp_path)


async def test_the_server_is_gone_after_session_close(tmp_path: Path) -> None:
    project, model, env = scripted(tmp_path)
    async with run_daemon(tmp_path, tmp_path / "data", model=model, env=env) as daemon:
        session = await started(tmp_path, daemon, project)
        assert await daemon.close_session(session) is not None
        await gone(project)


async def test_the_server_is_gone_after_kill_9_of_the_daemon(tmp_path: Path) -> None:
    project, model, env = scripted(tmp_path)
    async with run_daemon(tmp_path, tmp_path / "data", model=model, env=env) as daemon:
        await started(tmp_path, daemon, project)
        daemon.kill()
        await daemon.wait_killed()
    await gone(project)
