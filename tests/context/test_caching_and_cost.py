"""Prompt caching and cost: Anthropic ``cache_control`` breakpoints, built-in context windows and prices, and
``usage_update`` (used, size, cost) without configuration — through the real daemon and the loopback provider."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from dsh.context._accounting import Accounting
from dsh.services.llm import Price, builtin_price, builtin_window, estimate_request
from tests.context.test_sections import write_config
from tests.support.durable import run_daemon
from tests.support.provider_server import FakeProvider, Reply
from tests.support.provider_wire import (
    DONE,
    an_end,
    an_start,
    an_text,
    an_tool,
    oa_chunk,
    oa_finish,
    oa_text_reply,
    oa_usage,
)

EPHEMERAL = {"type": "ephemeral"}


def anthropic_env(server: FakeProvider) -> dict[str, str]:
    return {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "test"}


def marked(body: dict[str, Any]) -> list[tuple[int, int]]:
    """(message index, block index) of every message block that carries cache_control."""
    return [
        (i, j)
        for i, message in enumerate(body["messages"])
        for j, block in enumerate(message["content"])
        if "cache_control" in block
    ]


def usage_updates(daemon: Any, session: str) -> list[dict[str, Any]]:
    return [u for u in daemon.updates_in(0, session_id=session) if u.get("sessionUpdate") == "usage_update"]


async def test_anthropic_breakpoints_on_system_tools_and_the_last_two_user_messages(
    server: FakeProvider, tmp_path: Path
) -> None:
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "a.txt").write_text("alpha")
    server.script(
        Reply(
            events=[
                an_start(input_tokens=1000, cache_write=3000),
                *an_tool(0, "toolu_1", "read_file", ['{"path": "a.txt"}']),
                *an_end("tool_use", output_tokens=20),
            ]
        ),
        Reply(events=[an_start(input_tokens=50, cache_read=4000), *an_text(0, "It says alpha."), *an_end()]),
    )
    async with run_daemon(
        tmp_path, tmp_path / "data", model="anthropic:claude-sonnet-4-5-20250929", env=anthropic_env(server)
    ) as daemon:
        with anyio.fail_after(20):
            session = await daemon.start(cwd=tmp_path / "proj")
            await daemon.prompt(session, "read a.txt")
            updates = usage_updates(daemon, session)
    first, second = (r.body for r in server.requests)
    for body in (first, second):
        assert [block.get("cache_control") for block in body["system"]] == [EPHEMERAL]
        assert body["system"][0]["text"].startswith("You are dsh")
        assert [("cache_control" in tool) for tool in body["tools"]] == [False] * (len(body["tools"]) - 1) + [True]
    # the first user message carries the session note (date, mode) as its last blocks: the breakpoint is on it
    assert marked(first) == [(0, 3)] and first["messages"][0]["content"][0]["text"] == "read a.txt"
    assert first["messages"][0]["content"][1]["text"] == '<context source="session">'
    last = len(second["messages"]) - 1
    # the breakpoints move with the conversation: the last two user messages, the first of which is where the
    # first request's breakpoint stood (so the second reads it from the cache)
    assert marked(second) == [(0, 3), (last, 0)]
    assert second["messages"][last]["content"][0]["type"] == "tool_result"
    assert second["system"] == first["system"] and second["tools"] == first["tools"]
    # usage_update without configuration: the built-in window and price of claude-sonnet-4-5
    assert [u["size"] for u in updates] == [200_000, 200_000]
    assert [u["used"] for u in updates] == [1000 + 3000 + 20, 50 + 4000 + 5]
    step1 = (1000 * 3.0 + 3000 * 3.75 + 20 * 15.0) / 1e6
    step2 = (50 * 3.0 + 4000 * 0.30 + 5 * 15.0) / 1e6
    assert updates[0]["cost"] == {"amount": round(step1, 4), "currency": "USD"}
    assert updates[1]["cost"] == {"amount": round(step1 + step2, 4), "currency": "USD"}  # cumulative
    assert updates[0]["_meta"] == {"dsh": {"cacheReadTokens": 0, "cacheWriteTokens": 3000}}
    assert updates[1]["_meta"] == {"dsh": {"cacheReadTokens": 4000, "cacheWriteTokens": 0}}


async def test_openai_window_and_price_from_the_config_override_the_table(server: FakeProvider, tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    write_config(
        tmp_path,
        "providers:\n  openai:\n    context_windows: {gpt-4.1: 50000}\n"
        "    prices: {gpt-4.1: {input: 1.0, output: 2.0, cache_read: 0.5}}\n",
    )
    server.script(
        Reply(
            events=[
                oa_chunk({"role": "assistant", "content": "hi"}),
                oa_finish("stop"),
                oa_usage(1000, 100, prompt_tokens_details={"cached_tokens": 800}),
                DONE,
            ]
        ),
        Reply(events=oa_text_reply("again", prompt=1200, completion=10)),
    )
    env = {"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "test"}
    async with run_daemon(tmp_path, tmp_path / "data", model="openai:gpt-4.1", env=env) as daemon:
        with anyio.fail_after(20):
            session = await daemon.start(cwd=tmp_path)
            await daemon.prompt(session, "one")
            await daemon.prompt(session, "two")
            updates = usage_updates(daemon, session)
    first, second = (r.body for r in server.requests)
    # a stable prefix: the system message and the first turn are byte-identical in the next request
    assert second["messages"][: len(first["messages"]) + 1] == first["messages"] + [
        {"role": "assistant", "content": "hi"}
    ]
    assert [u["size"] for u in updates] == [50_000, 50_000]
    assert [u["used"] for u in updates] == [1100, 1210]
    cost1 = (200 * 1.0 + 800 * 0.5 + 100 * 2.0) / 1e6
    cost2 = (1200 * 1.0 + 10 * 2.0) / 1e6
    assert [u["cost"]["amount"] for u in updates] == [round(cost1, 4), round(cost1 + cost2, 4)]


async def test_unknown_model_has_no_usage_update(server: FakeProvider, tmp_path: Path) -> None:
    server.script(Reply(events=oa_text_reply("hi")))
    env = {"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "test"}
    async with run_daemon(tmp_path, tmp_path / "data", model="openai:local-llama", env=env) as daemon:
        with anyio.fail_after(20):
            session = await daemon.start(cwd=tmp_path)
            await daemon.prompt(session, "one")
            assert usage_updates(daemon, session) == []


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("openai:gpt-4.1", 1_047_576),
        ("openai:gpt-4.1-mini", 1_047_576),
        ("openai:gpt-4o-mini", 128_000),
        ("openai:gpt-5", 400_000),
        ("anthropic:claude-opus-4-1-20250805", 200_000),
        ("anthropic:claude-haiku-4-5", 200_000),
        ("deepseek:deepseek-chat", 128_000),
        ("openai:my-local-model", None),
        ("ollama:llama3", None),
        ("echo", None),
    ],
)
def test_builtin_windows(model: str, window: int | None) -> None:
    assert builtin_window(model) == window


def test_builtin_prices_take_the_longest_prefix() -> None:
    assert builtin_price("openai:gpt-4.1-mini-2025-04-14") == Price(0.40, 1.60, cache_read=0.10)
    assert builtin_price("openai:gpt-4.1") == Price(2.0, 8.0, cache_read=0.50)
    assert builtin_price("anthropic:claude-haiku-4-5-20251001") == Price(1.0, 5.0, cache_read=0.10, cache_write=1.25)
    assert builtin_price("openai:unknown") is None


def test_accounting_reported_plus_estimate_of_what_came_after() -> None:
    accounting = Accounting()
    assert accounting.tokens() is None
    accounting.on_usage({"input_tokens": 100, "output_tokens": 20}, None)
    assert accounting.tokens() == 120
    from dsh.services.sessions import SessionEvent

    accounting.on_event(SessionEvent("tool/result", 1, 0.0, {"content": [{"type": "text", "text": "x" * 400}]}))
    assert accounting.tokens() == 120 + 100 + 4
    accounting.on_usage({"input_tokens": 300, "output_tokens": 5}, Price(1.0, 1.0))
    assert accounting.tokens() == 305 and accounting.priced
    assert estimate_request([{"role": "user", "content": [{"type": "text", "text": "y" * 40}]}], "s" * 8) == 12 + 4
