"""Notices (issue 36 item 3, RFC 0033): one typed seam (``session/notice``), a ``notice`` update for a client that
advertised ``session.notices``, today's behaviour (the failed tool card, the log line) for any other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.acp_schema import modern_client

GONE = {"name": "gone", "command": "/nonexistent/dsh-test-mcp-server", "args": [], "env": []}


def _is_update(kind: str) -> Any:
    return lambda m: m.get("method") == "session/update" and m["params"]["update"].get("sessionUpdate") == kind


async def test_an_mcp_server_failure_is_a_notice_for_a_client_that_shows_notices(tmp_path: Path) -> None:
    async with modern_client(tmp_path, "echo") as (client, _):
        session = await client.new_session(tmp_path, mcpServers=[GONE])
        response = await client.prompt(session, "hello")  # the first request waits for the servers, then reports
        assert response["result"]["stopReason"] == "end_turn"
        message = await client.wait_for(_is_update("notice"))
        assert message["params"]["sessionId"] == session
        update = message["params"]["update"]
        assert update["severity"] == "error"
        assert update["title"].startswith("MCP server `gone`"), update
        assert update["_meta"] == {"dsh": {"source": "mcp"}}
        kinds = [u["sessionUpdate"] for u in client.updates(session)]
        assert "tool_call" not in kinds  # not also a failed card: shown once
        assert kinds.count("notice") == 1
    assert "mcp server did not start" in (tmp_path / "stderr.log").read_text()  # and the log line, as before


@pytest.mark.parametrize("capabilities", [{}, {"session": {"compaction": {}}, "subagents": {}, "plan": {}}])
async def test_without_session_notices_the_failure_stays_one_failed_tool_card(
    tmp_path: Path, capabilities: dict[str, Any]
) -> None:
    async with modern_client(tmp_path, "echo", capabilities) as (client, _):
        session = await client.new_session(tmp_path, mcpServers=[GONE])
        response = await client.prompt(session, "hello")
        assert response["result"]["stopReason"] == "end_turn"
        message = await client.wait_for(_is_update("tool_call"))
        card = message["params"]["update"]
        assert card["toolCallId"].startswith("mcp-server-")
        assert card["status"] == "failed" and card["kind"] == "other"
        assert card["title"].startswith("MCP server `gone`")
        assert card["content"] == [{"type": "content", "content": {"type": "text", "text": card["title"]}}]
        assert "notice" not in [u["sessionUpdate"] for u in client.updates(session)]


def test_the_fallbacks_of_a_notice() -> None:
    from dsh.frontends.acp._features import ClientFeatures
    from dsh.frontends.acp._notices import notice_updates
    from dsh.notices import Notice

    plain = ClientFeatures()
    log_only = Notice("s", "warning", "Compacting the conversation failed", "the model refused", source="context")
    assert notice_updates(log_only, plain) == []
    assert notice_updates(log_only, ClientFeatures(notices=True)) == [
        {
            "sessionUpdate": "notice",
            "severity": "warning",
            "title": "Compacting the conversation failed",
            "description": "the model refused",
            "_meta": {"dsh": {"source": "context"}},
        }
    ]
    message = Notice("s", "info", "Sandbox unavailable", fallback="message")
    assert notice_updates(message, plain) == [
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "\nSandbox unavailable\n"}}
    ]
    with pytest.raises(ValueError, match="non-empty title"):
        Notice("s", "info", "  ")
    with pytest.raises(ValueError, match="severity"):
        Notice("s", "fatal", "x")  # type: ignore[arg-type]


async def test_post_notice_emits_once() -> None:
    from dsh import events as ev
    from dsh.kernel import App
    from dsh.notices import Notice, post_notice

    seen: list[Notice] = []
    notice = Notice("s1", "error", "Budget exhausted", source="budgets")
    async with App() as app:
        app.ctx.on(ev.SESSION_NOTICE, seen.append)
        post_notice(app.ctx, notice)
    assert seen == [notice]


async def test_a_machine_without_a_sandbox_is_a_notice_at_the_first_turn(tmp_path: Path) -> None:
    env = {"DSH_SANDBOX_SIMULATE": "unavailable"}
    async with modern_client(tmp_path, "echo", env=env) as (client, _):
        session = await client.new_session(tmp_path)
        assert (await client.prompt(session, "one"))["result"]["stopReason"] == "end_turn"
        message = await client.wait_for(_is_update("notice"))
        update = message["params"]["update"]
        assert message["params"]["sessionId"] == session
        assert update["severity"] == "warning" and update["title"] == "Commands run without a sandbox"
        assert "simulated by DSH_SANDBOX_SIMULATE=unavailable" in update["description"]
        assert update["_meta"] == {"dsh": {"source": "sandbox"}}
        assert (await client.prompt(session, "two"))["result"]["stopReason"] == "end_turn"
        assert [u["sessionUpdate"] for u in client.updates(session)].count("notice") == 1  # once per session
    async with modern_client(tmp_path, "echo", {}, env=env, name="plain.log") as (client, _):
        session = await client.new_session(tmp_path)
        assert (await client.prompt(session, "one"))["result"]["stopReason"] == "end_turn"
        assert "notice" not in [u["sessionUpdate"] for u in client.updates(session)]
    assert "Commands run without a sandbox" in (tmp_path / "plain.log").read_text()  # the log line stays
