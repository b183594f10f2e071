"""``dsh chat`` draws an edit's new diagnostics under its card (issue 39): in a real terminal (tmux) with a real
``ruff server``; and what a server (or another agent) wrote is drawn sanitised, one line per diagnostic, bounded
(RFC 0030)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsh.chat._render import DIAGNOSTIC_LINES, diagnostic_lines, tool_card
from tests.chat.test_tty import prompt_ready, submit
from tests.lsp.test_ruff import RUFF
from tests.support.chat import tmux_available, tmux_chat
from tests.support.env import sandbox_env, write_script


@pytest.mark.skipif(not tmux_available(), reason="tmux is not installed")
@pytest.mark.skipif(RUFF is None, reason="ruff (the dev extra) is not installed")
async def test_the_chat_draws_an_edits_new_diagnostics_under_its_card(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\nversion = '0'\n")
    config = tmp_path / "config.yaml"
    servers = {"ruff": {"command": [RUFF, "server"], "languages": ["python"]}}
    config.write_text(json.dumps({"lsp": {"timeout": 30, "start_wait": 30, "servers": servers}}))
    write = {"name": "write_file", "arguments": {"path": "mod.py", "content": "print(nowhere)\n"}}
    model = write_script(tmp_path / "s.json", [{"text": "Writing.", "tool_calls": [write]}, {"text": "Written."}])
    env = {**sandbox_env(tmp_path, model), "DSH_CONFIG": str(config), "DSH_LSP": ""}
    with tmux_chat(tmp_path, [], env, tmp_path, width=120) as tmux:
        await tmux.wait_for(prompt_ready)
        await submit(tmux, "write it")
        await tmux.wait_for(lambda s: "Allow?" in s)
        tmux.keys("y")
        done = await tmux.wait_for(lambda s: "Written." in s and prompt_ready(s))
        lines = done.splitlines()
        (header,) = [i for i, line in enumerate(lines) if line.startswith("✔") and "mod.py" in line]
        assert "⚠ mod.py:1: error: Undefined name `nowhere` [Ruff F821] (ruff)" in "\n".join(lines[header:])
        assert "⚠ mod.py:1: error: Undefined name `nowhere` [Ruff F821] (ruff)" in done
        assert "\x1b[31m⚠ mod.py:1: error" in tmux.screen(escapes=True)  # an error is red
        tmux.keys("C-d")
        assert await tmux.exit_status() == 0


def card(diagnostics: Any) -> dict[str, Any]:
    return {
        "toolCallId": "e1",
        "title": "Edit a.py",
        "status": "completed",
        "_meta": {"dsh": {"diagnostics": diagnostics}},
    }


def test_a_servers_words_are_drawn_sanitised_on_one_line_and_bounded() -> None:
    hostile = {
        "path": "/w/a.py\x1b[2J",
        "line": 3,
        "severity": "error",
        "message": "bad\x1b]0;pwned\x07\nnext line\u202e",
        "source": "evil\r",
        "server": "srv\x1b[31m",
    }
    (line,) = diagnostic_lines(card({"new": [hostile], "notes": []}), "/w")
    assert "\x1b" not in line.plain and "\x07" not in line.plain and "\n" not in line.plain and "\r" not in line.plain
    assert "\u202e" not in line.plain
    assert line.plain.startswith("⚠ a.py")
    many = [{"path": "/w/a.py", "line": n, "severity": "warning", "message": "x" * 5000} for n in range(500)]
    lines = diagnostic_lines(card({"new": many, "others": many, "notes": ["(a note)"]}), "/w")
    assert len(lines) == DIAGNOSTIC_LINES + 1
    assert lines[-1].plain == f"… {1001 - DIAGNOSTIC_LINES} more diagnostics"
    assert all(len(line.plain) <= 302 for line in lines)
    for junk in (None, "x", [1], {"new": "x"}, {"new": [1, None]}):
        diagnostic_lines(card(junk), "/w")  # never raises
    assert diagnostic_lines({"toolCallId": "e2"}, None) == []
    tool_card(card({"new": [hostile]}), {}, cwd="/w")  # the card draws them
