"""What the model receives: the built-in system prompt sections, through the real daemon and a real HTTP server.

The daemon (``dsh acp``) runs as a subprocess, driven by the official ACP SDK client; the model is
``openai:test-model`` served by the loopback provider (tests/support/provider_server.py), so every assertion is on
the JSON body the provider received.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio

from tests.support.durable import run_daemon
from tests.support.env import sandbox_env
from tests.support.provider_server import FakeProvider, Reply
from tests.support.provider_wire import DONE, oa_chunk, oa_finish, oa_text_reply, oa_tool_delta, oa_usage

SECTION_HEADS = ["You are dsh", "# Tools", "# Environment", "# Project instructions"]
NOTE = '<context source="session">'
"""How a session note (the date, the mode: what can change mid-session) starts in the model's view."""


def provider_env(server: FakeProvider) -> dict[str, str]:
    return {"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "test"}


def system_of(body: dict[str, Any]) -> str:
    first = body["messages"][0]
    assert first["role"] == "system", body["messages"][:1]
    text: str = first["content"]
    return text


def make_repo(root: Path, branch: str = "feature/x") -> Path:
    """A git repository without git: ``.git/HEAD`` names *branch*."""
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "HEAD").write_text(f"ref: refs/heads/{branch}\n")
    return root


def write_config(workdir: Path, text: str) -> None:
    config = workdir / "home" / ".config" / "dsh"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.yaml").write_text(text)


def user_agents(workdir: Path, text: str) -> None:
    config = workdir / "home" / ".config" / "dsh"
    config.mkdir(parents=True, exist_ok=True)
    (config / "AGENTS.md").write_text(text)


async def test_sections_in_order_with_environment_and_instructions(server: FakeProvider, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    (repo / "AGENTS.md").write_text("ROOT RULE: run make check.")
    nested = repo / "pkg" / "sub"
    nested.mkdir(parents=True)
    (repo / "pkg" / "CLAUDE.md").write_text("PKG CLAUDE RULE.")
    (nested / "AGENTS.md").write_text("NESTED RULE: prefer anyio.")
    (nested / "CLAUDE.md").write_text("IGNORED: an AGENTS.md stands beside me.")
    (tmp_path / "AGENTS.md").write_text("OUTSIDE THE REPO: never used.")
    (tmp_path / "home").mkdir()
    user_agents(tmp_path, "USER RULE: answer in English.")
    server.script(Reply(events=oa_text_reply("ok")))
    today = datetime.date.today().isoformat()
    async with run_daemon(tmp_path, tmp_path / "data", model="openai:test-model", env=provider_env(server)) as daemon:
        with anyio.fail_after(20):
            session = await daemon.start(cwd=nested)
            await daemon.prompt(session, "hello")
    system = system_of(server.requests[0].body)
    positions = [system.find(head) for head in SECTION_HEADS]
    assert -1 not in positions, system
    assert positions == sorted(positions), system
    assert f"Working directory: {nested}" in system
    # the date can change mid-session: it is told in a note after the first message, not in the system prompt
    assert "Today's date" not in system and "# Mode" not in system
    note = server.requests[0].body["messages"][-1]
    assert note["role"] == "user" and note["content"].startswith(
        f"{NOTE}Today's date: {today}.\nThe session is in Default:"
    )
    assert f"Git repository: yes, root {repo}, branch feature/x" in system
    # instructions: the user's file, then repository root → cwd; CLAUDE.md only where no AGENTS.md beside it
    order = [system.find(t) for t in ("USER RULE", "ROOT RULE", "PKG CLAUDE RULE", "NESTED RULE")]
    assert -1 not in order and order == sorted(order), system
    assert "IGNORED" not in system and "OUTSIDE THE REPO" not in system
    # the tools section is generated from the tools the model is given
    for tool in server.requests[0].body["tools"]:
        assert f"- {tool['function']['name']}: " in system
    # the files used are recorded in the session log
    from tests.support.durable import read_session

    _, events = read_session(tmp_path / "data", session)
    recorded = [e["data"] for e in events if e["type"] == "context/instructions"]
    assert recorded == [
        {
            "files": [
                str(tmp_path / "home" / ".config" / "dsh" / "AGENTS.md"),
                str(repo / "AGENTS.md"),
                str(repo / "pkg" / "CLAUDE.md"),
                str(nested / "AGENTS.md"),
            ],
            "truncated": [],
        }
    ]


async def test_instruction_cap_truncates_visibly(server: FakeProvider, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", "main")
    (repo / "AGENTS.md").write_text("A" * 40_000 + "TAIL")
    server.script(Reply(events=oa_text_reply("ok")))
    async with run_daemon(tmp_path, tmp_path / "data", model="openai:test-model", env=provider_env(server)) as daemon:
        with anyio.fail_after(20):
            session = await daemon.start(cwd=repo)
            await daemon.prompt(session, "hello")
    system = system_of(server.requests[0].body)
    assert "A" * 32_000 in system and "A" * 32_001 not in system
    assert "TAIL" not in system
    assert (
        "[truncated: 8004 of 40004 characters of this file left out; project instructions are capped at 32000" in system
    )
    assert "Git repository: yes" in system and "branch main" in system
    del session


async def test_step_two_sends_the_same_system_and_tools_bytes(server: FakeProvider, tmp_path: Path) -> None:
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "f.txt").write_text("content")
    server.script(
        Reply(
            events=[
                oa_chunk({"role": "assistant", "content": None}),
                oa_tool_delta(0, "", "call_1", "read_file"),
                oa_tool_delta(0, '{"path": "f.txt"}'),
                oa_finish("tool_calls"),
                oa_usage(50, 10),
                DONE,
            ]
        ),
        Reply(events=oa_text_reply("done")),
    )
    async with run_daemon(tmp_path, tmp_path / "data", model="openai:test-model", env=provider_env(server)) as daemon:
        with anyio.fail_after(20):
            session = await daemon.start(cwd=tmp_path / "proj")
            await daemon.prompt(session, "read f.txt")
    first, second = server.requests
    assert system_of(first.body) == system_of(second.body)
    assert first.body["tools"] == second.body["tools"]
    assert "Git repository: no" in system_of(first.body)
    assert second.body["messages"][1] == first.body["messages"][1]  # the prefix only grows


async def test_a_mode_switch_leaves_the_prompt_and_tools_byte_identical_and_is_told_as_a_message(
    server: FakeProvider, tmp_path: Path
) -> None:
    """Issue 35: nothing that can change mid-session lives in the system prompt. A mode switch between two turns
    leaves the system prompt and the tool list byte-identical; the second request repeats the first one's messages
    as its prefix; the switch reaches the model as a short message at the point of change. Overrides still apply."""
    (tmp_path / "proj").mkdir()
    (tmp_path / "home").mkdir()
    write_config(
        tmp_path,
        "system_prompt: EXTRA FROM CONFIG\n"
        "system_prompt_sections:\n  identity: You are a test agent.\n  environment: false\n  house: HOUSE RULES.\n",
    )
    server.script(
        Reply(events=oa_text_reply("one")), Reply(events=oa_text_reply("two")), Reply(events=oa_text_reply("3"))
    )
    async with run_daemon(tmp_path, tmp_path / "data", model="openai:test-model", env=provider_env(server)) as daemon:
        with anyio.fail_after(20):
            session = await daemon.start(cwd=tmp_path / "proj")
            await daemon.prompt(session, "first")
            await daemon.conn.set_session_mode(session_id=session, mode_id="plan")
            await daemon.prompt(session, "second")
            await daemon.prompt(session, "third")  # no change: no note
    first, second, third = (r.body for r in server.requests)
    before = system_of(first)
    assert before.startswith("You are a test agent.\n\n# Tools")
    assert "# Environment" not in before
    assert before.endswith("HOUSE RULES.\n\nEXTRA FROM CONFIG")
    assert "- exit_plan_mode: " in before  # offered in every mode: the tool list does not move with the mode
    for later in (second, third):
        assert system_of(later) == before
        assert json.dumps(later["tools"], sort_keys=True) == json.dumps(first["tools"], sort_keys=True)
    assert second["messages"][: len(first["messages"])] == first["messages"]
    assert third["messages"][: len(second["messages"])] == second["messages"]
    told = [m["content"] for m in second["messages"] if m["role"] == "user" and m["content"].startswith(NOTE)]
    assert len(told) == 2
    assert "The session is in Default:" in told[0]
    assert told[1] == (
        f"{NOTE}The user switched the session to Plan: read-only. Reading and searching are allowed; editing files "
        "and running commands are refused. Investigate, then propose a concrete plan (the files and the changes you "
        "would make, and how you would check them) and wait for the user to approve it and leave plan mode.</context>"
    )
    roles = [(m["role"], m["content"][:20]) for m in second["messages"][len(first["messages"]) :]]
    assert roles == [("assistant", "one"), ("user", "second"), ("user", told[1][:20])]  # at the point of change
    assert [m for m in third["messages"][len(second["messages"]) :] if m["role"] == "user"] == [
        {"role": "user", "content": "third"}
    ]


def test_config_show_system_prompt_prints_what_a_session_sends(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", "trunk")
    (repo / "AGENTS.md").write_text("SHOWN RULE.")
    env = sandbox_env(tmp_path, "echo", extra={"DSH_SYSTEM_PROMPT": "EXTRA"})
    result = subprocess.run(
        [sys.executable, "-m", "dsh", "config", "show", "--system-prompt", "--cwd", str(repo)],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.startswith("You are dsh")
    assert f"Working directory: {repo}" in out and "branch trunk" in out and "SHOWN RULE." in out
    assert out.endswith("\n\nEXTRA\n")


async def test_the_environment_section_names_the_sessions_additional_directories(
    server: FakeProvider, tmp_path: Path
) -> None:
    """``additionalDirectories`` of session/new, and of session/resume, reach the environment section."""
    project, extra, other = tmp_path / "project", tmp_path / "shared-lib", tmp_path / "docs"
    for directory in (project, extra, other):
        directory.mkdir()
    server.script(Reply(events=oa_text_reply("one")), Reply(events=oa_text_reply("two")))
    async with run_daemon(tmp_path, tmp_path / "data", model="openai:test-model", env=provider_env(server)) as daemon:
        with anyio.fail_after(20):
            await daemon.initialize()
            created = await daemon.conn.new_session(
                cwd=str(project), mcp_servers=[], additional_directories=[str(extra)]
            )
            await daemon.prompt(created.session_id, "hello")
            await daemon.close_session(created.session_id)
            await daemon.conn.resume_session(
                cwd=str(project), session_id=created.session_id, mcp_servers=[], additional_directories=[str(other)]
            )
            await daemon.prompt(created.session_id, "again")
    first, second = (system_of(request.body) for request in server.requests)
    assert f"Additional directories: {extra}" in first.splitlines()
    assert f"Additional directories: {other}" in second.splitlines()
