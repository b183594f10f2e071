"""Reasoning effort over ACP: the ``thought_level`` config option, the request body at a loopback provider, and
the choice surviving a restart (``tests.support.sdk`` + ``tests.support.provider_server``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from dsh.providers._reasoning import ReasoningSupport
from dsh.providers._settings import BUILTIN_PROVIDERS, ProviderSettings
from tests.support.provider_server import Reply, serve
from tests.support.provider_wire import an_text_reply, oa_text_reply
from tests.support.sdk import run_dsh

WAIT = 15.0


def options(state: Any) -> dict[str, Any]:
    return {o.id: o for o in state.config_options}


@pytest.mark.parametrize(
    ("provider", "model", "levels"),
    [
        ("openai", "o3-mini", ("low", "medium", "high")),
        ("openai", "gpt-5", ("low", "medium", "high")),
        ("openai", "gpt-4.1", ()),
        ("deepseek", "deepseek-reasoner", ()),
        ("anthropic", "claude-sonnet-4-5", ("off", "low", "medium", "high")),
        ("anthropic", "claude-3-5-haiku", ()),
    ],
)
def test_the_built_in_table(provider: str, model: str, levels: tuple[str, ...]) -> None:
    assert ReasoningSupport(BUILTIN_PROVIDERS[provider]).levels(model) == levels


def test_the_config_overrides_the_table_per_model() -> None:
    settings = ProviderSettings(type="openai", thought_levels={"o3": [], "my-thinker": ["low", "high"]})
    support = ReasoningSupport(settings)
    assert support.levels("o3") == ()
    assert support.levels("my-thinker") == ("low", "high")
    assert support.extra("my-thinker", "high") == {"reasoning_effort": "high"}


def test_anthropic_levels_become_a_thinking_budget_with_room_for_the_answer() -> None:
    support = ReasoningSupport(BUILTIN_PROVIDERS["anthropic"])
    assert support.extra("claude-sonnet-4-5", "off") == {}
    assert support.extra("claude-sonnet-4-5", "low") == {
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "max_tokens": 8192,
    }
    assert support.extra("claude-sonnet-4-5", "high")["max_tokens"] == 24576 + 4096


async def test_thought_level_reaches_the_request_and_survives_a_restart(tmp_path: Path) -> None:
    with serve() as server:
        server.script(*(Reply(events=oa_text_reply(f"answer {n}")) for n in range(3)))
        # o3-mini would use the Responses API by default (issue 23; its effort is tested in
        # tests/providers/test_openai_responses.py): this test keeps it on Chat Completions, by configuration
        config = tmp_path / "config.yaml"
        config.write_text("providers:\n  openai: {wire_formats: {o3-mini: chat-completions}}\n")
        env = {"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "test", "DSH_CONFIG": str(config)}
        async with run_dsh(tmp_path, "openai:o3-mini", env=env, name="first") as daemon:
            with anyio.fail_after(WAIT):
                await daemon.initialize()
                created = await daemon.conn.new_session(cwd=str(tmp_path), mcp_servers=[])
                session_id = created.session_id
                level = options(created)["thought_level"]
                assert level.category == "thought_level" and level.current_value == "medium"
                assert [o.value for o in level.options] == ["low", "medium", "high"]
                assert (await daemon.prompt(session_id, "one")).stop_reason == "end_turn"
                changed = await daemon.conn.set_config_option(
                    config_id="thought_level", session_id=session_id, value="high"
                )
                assert options(changed)["thought_level"].current_value == "high"
                assert (await daemon.prompt(session_id, "two")).stop_reason == "end_turn"
        async with run_dsh(tmp_path, "openai:o3-mini", env=env, name="second") as daemon:
            with anyio.fail_after(WAIT):
                await daemon.initialize()
                loaded = await daemon.conn.load_session(cwd=str(tmp_path), session_id=session_id, mcp_servers=[])
                assert options(loaded)["thought_level"].current_value == "high"
                assert (await daemon.prompt(session_id, "three")).stop_reason == "end_turn"
        efforts = [body.get("reasoning_effort") for body in server.bodies()]
        assert efforts == ["medium", "high", "high"]


async def test_a_model_without_reasoning_effort_offers_no_option_and_rejects_one(tmp_path: Path) -> None:
    from acp import RequestError

    async with run_dsh(tmp_path) as daemon:
        with anyio.fail_after(WAIT):
            await daemon.initialize()
            created = await daemon.conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            assert "thought_level" not in options(created)
            with pytest.raises(RequestError) as raised:
                await daemon.conn.set_config_option(
                    config_id="thought_level", session_id=created.session_id, value="high"
                )
        assert raised.value.code == -32602 and "not offered for echo" in str(raised.value)


async def test_anthropic_thinking_budget_reaches_the_request(tmp_path: Path) -> None:
    with serve() as server:
        server.script(Reply(events=an_text_reply("thought about it")))
        env = {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": "test"}
        async with run_dsh(tmp_path, "anthropic:claude-sonnet-4-5", env=env) as daemon:
            with anyio.fail_after(WAIT):
                session_id = await daemon.start()
                await daemon.conn.set_config_option(config_id="thought_level", session_id=session_id, value="low")
                assert (await daemon.prompt(session_id, "think")).stop_reason == "end_turn"
        (body,) = server.bodies()
        assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
        assert body["max_tokens"] == 8192
