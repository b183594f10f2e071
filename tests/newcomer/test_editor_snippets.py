"""Issue #29 item 8: the README's Neovim CodeCompanion snippet and acpx commands work as written.

The Lua snippet is read from the README; the command it gives CodeCompanion (with this checkout's
``.venv/bin/dsh`` for the placeholder) is spawned as is and driven the way CodeCompanion's ``goose`` adapter
(which the snippet extends) drives an agent: ``fs`` read and write, no terminal (codecompanion.nvim at f1afd02,
``lua/codecompanion/adapters/acp/goose.lua``). A slash command typed with ``\\`` is rewritten to ``/`` for each
command the agent announced (``ACPHandler:transform_acp_commands``), so ``\\help`` must reach dsh as ``/help``
and be answered.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.editor import EditorClient, run_editor
from tests.support.env import ROOT

PLACEHOLDER = "/absolute/path/to/dsh/.venv/bin/dsh"
DSH = Path(sys.executable).parent / "dsh"


def readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def lua_snippet() -> str:
    section = readme().split("### Neovim (CodeCompanion) and acpx", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```lua\n(.*?)```", section, re.S)
    assert found is not None, "no Lua snippet in the Neovim section"
    return found.group(1)


def snippet_command(lua: str) -> list[str]:
    found = re.search(r"commands = \{ default = \{ (.*?) \} \}", lua)
    assert found is not None
    return re.findall(r'"([^"]*)"', found.group(1))


def transform_acp_commands(text: str, commands: list[str], trigger: str = "\\") -> str:
    """CodeCompanion's rewrite of ``\\name`` to ``/name`` for the announced commands (handler.lua)."""
    for name in commands:
        text = re.sub(re.escape(trigger + name) + r"(?=\W|$)", "/" + name, text)
    return text


def test_the_snippet_is_a_codecompanion_acp_adapter_named_dsh_that_runs_dsh_acp() -> None:
    lua = lua_snippet()
    assert 'require("codecompanion").setup({' in lua
    assert re.search(r"adapters = \{\s*acp = \{\s*dsh = function\(\)", lua)
    assert 'require("codecompanion.adapters").extend("goose", {' in lua
    assert 'name = "dsh"' in lua and 'interactions = { chat = { adapter = "dsh" } }' in lua
    assert snippet_command(lua) == [PLACEHOLDER, "acp"]
    assert lua.count("{") == lua.count("}") and lua.count("(") == lua.count(")")


def test_the_acpx_commands_name_the_same_daemon() -> None:
    section = readme().split("### Neovim (CodeCompanion) and acpx", 1)[1].split("\n## ", 1)[0]
    assert f'npx acpx --agent "{PLACEHOLDER} acp" exec "' in section
    assert "| Neovim CodeCompanion |" in section and "| acpx |" in section and "| Zed |" in section


@pytest.mark.skipif(not DSH.exists(), reason="needs the dsh console script of this virtualenv")
async def test_the_snippets_command_answers_codecompanion_and_its_backslash_commands(tmp_path: Path) -> None:
    command = [str(DSH) if part == PLACEHOLDER else part for part in snippet_command(lua_snippet())]
    async with run_editor(tmp_path, "echo", EditorClient([]), fs=True, command=command) as editor:
        session = (await editor.new_session()).session_id
        await editor.wait(lambda: bool(announced(editor.updates(session))))
        names = announced(editor.updates(session))
        assert "help" in names and "model" in names
        typed = "\\help"
        sent = transform_acp_commands(typed, names)
        assert sent == "/help"
        before = len(editor.updates(session))
        assert (await editor.prompt(session, sent)).stop_reason == "end_turn"
        answer = "".join(
            u["content"]["text"]
            for u in editor.updates(session)[before:]
            if u.get("sessionUpdate") == "agent_message_chunk"
        )
    assert "/model" in answer and "/help" in answer, answer  # the command ran: it is not echoed back as text


def announced(updates: list[dict[str, Any]]) -> list[str]:
    lists = [u["availableCommands"] for u in updates if u.get("sessionUpdate") == "available_commands_update"]
    return [command["name"] for command in lists[-1]] if lists else []
