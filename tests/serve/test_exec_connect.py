"""``dsh exec --connect URL`` against a real ``dsh serve``: the answer on stdout / one ``result`` line, exit 0; a
permission no ``--allow-*`` flag allows is refused (exit 1, listed in ``denied``); a wrong token exits 1."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio

from tests.support.editor import call, write_script
from tests.support.env import sandbox_env
from tests.support.serve import TOKEN, running_server


async def _exec(tmp_path: Path, url: str, *args: str, token: str = TOKEN) -> subprocess.CompletedProcess[bytes]:
    env = {**sandbox_env(tmp_path, "echo"), "DSH_SERVE_TOKEN": token}
    argv = [sys.executable, "-m", "dsh", "exec", "--connect", url, *args]
    with anyio.fail_after(120):
        return await anyio.run_process(argv, env=env, check=False, stdin=subprocess.DEVNULL)


def _text(result: subprocess.CompletedProcess[bytes]) -> tuple[str, str]:
    return result.stdout.decode(), result.stderr.decode()


def _script(tmp_path: Path) -> str:
    """Each connection has its own application, so each run's scripted model starts at this script's first step."""
    return write_script(
        tmp_path / "script.json", [call("write_file", "w1", path="one.txt", content="1\n"), {"text": "first done"}]
    )


async def test_exec_connect_runs_an_allowed_edit(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    async with running_server(tmp_path, _script(tmp_path)) as server:
        allowed = await _exec(tmp_path, server.url, "--allow-edits", "--cwd", str(project), "--json", "write one")
        out, err = _text(allowed)
        assert allowed.returncode == 0, err
        line = json.loads(out)
        assert line["type"] == "result" and line["stopReason"] == "end_turn" and line["text"] == "first done"
        assert line["denied"] == []
        assert (project / "one.txt").read_text() == "1\n"

        wrong = await _exec(tmp_path, server.url, "hello", token="wrong")
        out, err = _text(wrong)
        assert wrong.returncode == 1 and "HTTP 401" in err


async def test_exec_connect_refuses_what_no_flag_allows(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    async with running_server(tmp_path, _script(tmp_path)) as server:
        refused = await _exec(tmp_path, server.url, "--cwd", str(project), "write one")
        out, err = _text(refused)
        assert refused.returncode == 1, err
        assert out == "first done\n"  # the model was told and went on; the answer is still printed
        assert "refused" in err and "one.txt" in err
        assert not (project / "one.txt").exists()
