"""The system prompt says how to work (issue 22): autonomy, git etiquette, verification, the dedicated tools, the
final answer; the environment section has the git status summary and the last commits; the tool schemas sent
are compact. Checked on what ``dsh config show --system-prompt`` prints and on what a provider receives."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio

from tests.support.durable import run_daemon
from tests.support.env import sandbox_env
from tests.support.provider_server import FakeProvider, Reply
from tests.support.provider_wire import oa_text_reply

RULES = [
    "# Autonomy",
    "Keep going until the user's request is completely done",
    "critically underspecified",
    "destructive or irreversible",
    "# Git",
    "Never commit, amend, push, create or switch branches",
    "Never revert, discard or overwrite changes you did not make",
    "`git reset --hard`, `git checkout -- <file>`",
    "check `git status`",
    "# Verify your work",
    "run the project's own tests, linters and type checks",
    "Say what you could not verify",
    "Prefer the dedicated tools to shell equivalents",
    "not cat, head or tail",
    "# The final answer",
    "`path:line`",
]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        check=True,
        capture_output=True,
        timeout=30,
    )


def make_git_repo(root: Path) -> Path:
    """A real repository on branch main: two commits, one changed file, one untracked file."""
    root.mkdir(parents=True)
    _git(root, "init", "-q", "-b", "main")
    (root / "a.txt").write_text("one\n")
    _git(root, "add", "a.txt")
    _git(root, "commit", "-q", "-m", "First commit")
    (root / "b.txt").write_text("two\n")
    _git(root, "add", "b.txt")
    _git(root, "commit", "-q", "-m", "Add b, the second file")
    (root / "a.txt").write_text("one, changed\n")
    (root / "new.txt").write_text("untracked\n")
    return root


def test_config_show_system_prompt_has_the_working_rules_and_the_git_summary(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    env = sandbox_env(tmp_path, "echo")
    result = subprocess.run(
        [sys.executable, "-m", "dsh", "config", "show", "--system-prompt", "--cwd", str(repo)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    missing = [rule for rule in RULES if rule not in out]
    assert not missing, missing
    assert "Git status: branch main; 1 changed file, 1 untracked" in out
    commits = out.split("Recent commits:\n", 1)[1].split("\n")[:2]
    assert [line.split(" ", 3)[-1] for line in commits] == ["Add b, the second file", "First commit"]
    # "A few thousand tokens at most" (about 4 characters a token), tool descriptions included.
    assert len(out) < 4 * 3000, len(out)


def _walk(node: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        found.append(node)
        for value in node.values():
            found += _walk(value)
    elif isinstance(node, list):
        for value in node:
            found += _walk(value)
    return found


async def test_the_tool_schemas_sent_are_compact(server: FakeProvider, tmp_path: Path) -> None:
    server.script(Reply(events=oa_text_reply("ok")))
    project = tmp_path / "project"
    project.mkdir()
    env = {"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "test"}
    async with run_daemon(tmp_path, tmp_path / "data", model="openai:test-model", env=env) as daemon:
        with anyio.fail_after(20):
            session = await daemon.start(cwd=project)
            await daemon.prompt(session, "hello")
    tools = server.requests[0].body["tools"]
    names = [tool["function"]["name"] for tool in tools]
    for name in ("read_file", "edit_file", "glob", "grep", "command_output", "fetch_url"):
        assert name in names
    for tool in tools:
        parameters = tool["function"]["parameters"]
        assert parameters.get("additionalProperties") is False, (tool["function"]["name"], parameters)
        for node in _walk(parameters):
            assert "title" not in node or not isinstance(node["title"], str), (tool["function"]["name"], node)
            assert {"type": "null"} not in node.get("anyOf", []), (tool["function"]["name"], node)
    edit = next(tool for tool in tools if tool["function"]["name"] == "edit_file")["function"]["parameters"]
    assert edit["properties"]["old_string"] == {
        "type": "string",
        "description": "The text to replace, as in the file (whitespace and indentation included).",
    }
    assert edit["properties"]["edits"]["items"]["additionalProperties"] is False
    ask = next(tool for tool in tools if tool["function"]["name"] == "ask_user")["function"]["description"]
    assert "critically underspecified" in ask and "destructive or irreversible" in ask
    print(json.dumps({"tool_schema_bytes": len(json.dumps(tools))}))
