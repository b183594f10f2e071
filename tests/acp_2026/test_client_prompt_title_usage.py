"""The client's system prompt, ``session/set_title`` and the per-turn usage (issue 36 items 5 and 6, RFC 0033), over
real pipes. The daemon runs the preview's capture plugin: each model call answers with the system prompt it was
sent, so the test reads exactly what the model would have read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dsh.context._sections import IDENTITY
from dsh.frontends.acp._preview import CAPTURE_PLUGIN
from tests.support.acp_schema import ModernClient, modern_client


def _said(client: ModernClient, session: str, since: int) -> str:
    return "".join(
        u["content"]["text"]
        for u in client.updates(session, since=since)
        if u["sessionUpdate"] == "agent_message_chunk"
    )


async def _system(client: ModernClient, session: str) -> str:
    mark = len(client.messages)
    response = await client.prompt(session, ".")
    assert response["result"]["stopReason"] == "end_turn", response
    return _said(client, session, mark)


def _prompt(mode: str, text: str) -> dict[str, Any]:
    return {"mode": mode, "content": [{"type": "text", "text": text}]}


async def test_append_adds_a_section_after_dsh_s_and_a_load_restores_it(tmp_path: Path) -> None:
    async with modern_client(tmp_path, "echo", plugins=CAPTURE_PLUGIN) as (client, init):
        assert init["agentCapabilities"]["sessionCapabilities"]["systemPrompt"] == {"mode": {"override": {}}}
        plain = await _system(client, await client.new_session(tmp_path))
        session = await client.new_session(tmp_path, systemPrompt=_prompt("append", "Answer in French."))
        system = await _system(client, session)
        assert system == plain + "\n\nAnswer in French."  # dsh's prompt unchanged, the client's section last
        await client.call("session/close", {"sessionId": session})
        await client.call("session/load", {"sessionId": session, "cwd": str(tmp_path), "mcpServers": []})
        assert await _system(client, session) == system  # stored with the session
        await client.call("session/close", {"sessionId": session})
        replaced = _prompt("append", "Answer in Dutch.")
        await client.call(
            "session/resume", {"sessionId": session, "cwd": str(tmp_path), "mcpServers": [], "systemPrompt": replaced}
        )
        assert await _system(client, session) == plain + "\n\nAnswer in Dutch."


async def test_override_replaces_the_base_prompt_and_never_the_safety_sections(tmp_path: Path) -> None:
    async with modern_client(tmp_path, "echo", plugins=CAPTURE_PLUGIN) as (client, _):
        plain = await _system(client, await client.new_session(tmp_path))
        session = await client.new_session(tmp_path, systemPrompt=_prompt("override", "You are Pirate, a helper."))
        system = await _system(client, session)
        assert system.startswith("You are Pirate, a helper.\n\n")
        assert IDENTITY.splitlines()[0] not in system
        assert plain.startswith(IDENTITY)
        assert system == plain.replace(IDENTITY, "You are Pirate, a helper.", 1)  # everything else kept as it was
        assert "\n\n# Tools\n" in system  # the tool contracts (the sandbox's rules are in run_command's)
        await client.call("session/set_mode", {"sessionId": session, "modeId": "plan"})
        assert await _system(client, session) == system  # the mode is a session note, never the client's to replace


async def test_a_bad_system_prompt_creates_nothing(tmp_path: Path) -> None:
    async with modern_client(tmp_path, "echo") as (client, _):
        for bad in (
            {"mode": "replace", "content": [{"type": "text", "text": "x"}]},
            {"mode": "append", "content": []},
            {"mode": "append", "content": [{"type": "image", "data": "AA==", "mimeType": "image/png"}]},
        ):
            response = await client.request(
                "session/new", {"cwd": str(tmp_path), "mcpServers": [], "systemPrompt": bad}
            )
            assert response["error"]["code"] == -32602, response
        assert (await client.call("session/list", {}))["sessions"] == []


async def test_set_title_is_stored_announced_listed_and_survives_a_load(tmp_path: Path) -> None:
    async with modern_client(tmp_path, "echo") as (client, init):
        assert init["agentCapabilities"]["sessionCapabilities"]["title"] == {}
        session = await client.new_session(tmp_path)
        response = await client.prompt(session, "first message")
        usage = response["result"]["usage"]
        assert usage["inputTokens"] > 0 and usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"]
        mark = len(client.messages)
        assert await client.call("session/set_title", {"sessionId": session, "title": "  My   work  "}) == {
            "title": "My work"
        }
        infos = [u for u in client.updates(session, since=mark) if u["sessionUpdate"] == "session_info_update"]
        assert [u["title"] for u in infos] == ["My work"]
        assert (await client.call("session/list", {}))["sessions"][0]["title"] == "My work"
        empty = await client.request("session/set_title", {"sessionId": session, "title": "   "})
        assert empty["error"]["code"] == -32602
        unknown = await client.request("session/set_title", {"sessionId": "nope", "title": "x"})
        assert unknown["error"]["code"] == -32002
        await client.call("session/close", {"sessionId": session})
        closed = await client.request("session/set_title", {"sessionId": session, "title": "x"})
        assert closed["error"]["code"] == -32602 and "not open" in closed["error"]["message"]
        await client.call("session/load", {"sessionId": session, "cwd": str(tmp_path), "mcpServers": []})
        assert (await client.call("session/list", {}))["sessions"][0]["title"] == "My work"
        mark = len(client.messages)
        await client.prompt(session, "another message")
        assert not [u for u in client.updates(session, since=mark) if u["sessionUpdate"] == "session_info_update"]


async def test_a_client_without_capabilities_is_offered_neither_and_gets_no_usage(tmp_path: Path) -> None:
    async with modern_client(tmp_path, "echo", {}) as (client, init):
        capabilities = init["agentCapabilities"]["sessionCapabilities"]
        assert "systemPrompt" not in capabilities and "title" not in capabilities
        session = await client.new_session(tmp_path)
        assert (await client.prompt(session, "hi"))["result"] == {"stopReason": "end_turn"}


def test_config_show_system_prompt_shows_a_client_prompt(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.support.env import sandbox_env

    env = sandbox_env(tmp_path, "echo")
    command = [sys.executable, "-m", "dsh", "config", "show", "--system-prompt", "--cwd", str(tmp_path)]
    shown = {}
    for mode in ("append", "override"):
        extra = ["--client-prompt", "CLIENT RULE.", "--client-prompt-mode", mode]
        result = subprocess.run([*command, *extra], capture_output=True, text=True, env=env, timeout=60, check=False)
        assert result.returncode == 0, result.stderr
        shown[mode] = result.stdout
    plain = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60, check=False).stdout
    assert shown["append"] == plain[:-1] + "\n\nCLIENT RULE.\n"
    assert shown["override"] == plain.replace(IDENTITY, "CLIENT RULE.", 1)
