"""``dsh chat --connect ws://…/acp`` in tmux against a real ``dsh serve``: a turn with a tool call whose permission
is answered with ``y``, the file written on the server's side, a clean exit."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.chat import tmux_available, tmux_chat
from tests.support.editor import call, write_script
from tests.support.env import sandbox_env
from tests.support.serve import TOKEN, running_server

pytestmark = pytest.mark.skipif(not tmux_available(), reason="tmux is not installed")

PROMPT = "\u276f"  # the chat's prompt mark


def ready(screen: str) -> bool:
    lines = screen.splitlines()
    return (
        any(line.startswith(PROMPT) for line in lines) and "Ctrl+C cancels" not in screen and "starting" not in screen
    )


async def test_chat_connect_runs_a_turn_with_a_permission_in_tmux(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    model = write_script(
        tmp_path / "script.json", [call("write_file", "w1", path="hello.txt", content="hello\n"), {"text": "Written."}]
    )
    async with running_server(tmp_path, model) as server:
        env = {**sandbox_env(tmp_path, "echo"), "DSH_SERVE_TOKEN": TOKEN}
        with tmux_chat(tmp_path, ["--connect", server.url, "--cwd", str(project)], env, project) as tmux:
            await tmux.wait_for(ready, within=60)
            tmux.type("write it")
            await tmux.wait_for(lambda screen: "write it" in screen)
            tmux.keys("Enter")
            asking = await tmux.wait_for(lambda screen: "Allow?" in screen, within=60)
            assert "hello.txt" in asking
            tmux.keys("y")
            await tmux.wait_for(lambda screen: "Written." in screen and ready(screen), within=60)
            assert (project / "hello.txt").read_text(encoding="utf-8") == "hello\n"
            tmux.keys("C-d")
            assert await tmux.exit_status(within=30) == 0
