"""What the model is told about its tools: an MCP server's tools are listed in the system prompt's tools section
like the built-in ones, the section is the same at every step, and ``dsh config show --system-prompt`` prints
exactly the system prompt a real session sent to a loopback provider (MCP tools, and whatever tools the front end
offers in the session's mode, included)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio

from tests.context.test_sections import make_repo, provider_env, system_of, write_config
from tests.support.durable import run_daemon
from tests.support.env import sandbox_env
from tests.support.mcp_servers import serve_http
from tests.support.provider_server import FakeProvider, Reply
from tests.support.provider_wire import oa_text_reply


def config_text(url: str) -> str:
    return f"mcp_servers:\n  web: {{type: http, url: {json.dumps(url)}}}\n"


async def test_mcp_tools_are_in_the_tools_section_and_config_show_prints_what_a_session_sends(
    server: FakeProvider, tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo", "trunk")
    (repo / "AGENTS.md").write_text("PROJECT RULE.")
    (tmp_path / "home").mkdir()
    server.script(Reply(events=oa_text_reply("one")), Reply(events=oa_text_reply("two")))
    env = provider_env(server) | {"SHELL": "/bin/sh"}  # the environment section names it: the same in both
    with serve_http("streamable-http") as url:
        write_config(tmp_path, config_text(url))
        async with run_daemon(tmp_path, tmp_path / "data", model="openai:test-model", env=env) as daemon:
            with anyio.fail_after(30):
                session = await daemon.start(cwd=repo)
                assert (await daemon.prompt(session, "hello")).stop_reason == "end_turn"
                assert (await daemon.prompt(session, "again")).stop_reason == "end_turn"
        with anyio.fail_after(60):
            result = await anyio.run_process(
                [sys.executable, "-m", "dsh", "config", "show", "--system-prompt", "--cwd", str(repo)],
                env=sandbox_env(tmp_path, "openai:test-model", data_dir=tmp_path / "other-data", extra=env),
                cwd=tmp_path,
                check=False,
            )
    first, second = (system_of(request.body) for request in server.requests)
    tools_section = first[first.index("# Tools") :].split("\n# ")[0]
    listed = [line[2:].split(":")[0] for line in tools_section.splitlines() if line.startswith("- ")]
    sent = [tool["function"]["name"] for tool in server.requests[0].body["tools"]]
    assert listed == sent  # every tool the model is given, in the order it is given, built-in and MCP alike
    assert "mcp__web__ping" in listed and "read_file" in listed
    assert second == first  # the same bytes at the next step
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode() == first + "\n"
    assert not (tmp_path / "other-data").exists()  # the preview's session went to a temporary directory
