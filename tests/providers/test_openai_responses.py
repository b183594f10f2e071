"""The OpenAI Responses wire format end to end: the daemon with ``openai:o4-mini`` (a reasoning family: Responses by
default) at a loopback server speaking the Responses streaming events, driven by the ACP SDK client. Reasoning
items of step 1 are sent back in step 2; ``reasoning.effort`` follows the thought level; the tool runs; after a
restart, ``session/load`` and a prompt send the stored reasoning items again; a summary is shown as thoughts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from dsh.providers._settings import BUILTIN_PROVIDERS, ProviderSettings
from dsh.providers.openai_responses import build_body, to_input, wire_format
from dsh.services.llm import GenerateRequest
from tests.support.bulk_tool import PLUGIN, bulk_text
from tests.support.durable import run_daemon
from tests.support.provider_server import Event, FakeProvider, Reply
from tests.support.provider_wire import rs_call, rs_completed, rs_created, rs_reasoning, rs_text

MODEL = "openai:o4-mini"
ARGUMENTS = '{"size": 40, "label": "a"}'
REASONING_1 = {
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "Plan the call."}],
    "id": "rs_1",
    "encrypted_content": "ENC-1",
}
REASONING_2 = {
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "Read it."}],
    "id": "rs_2",
    "encrypted_content": "ENC-2",
}


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def assistant(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


@pytest.mark.parametrize(
    ("provider", "settings", "model", "wire"),
    [
        ("openai", BUILTIN_PROVIDERS["openai"], "o4-mini", "responses"),
        ("openai", BUILTIN_PROVIDERS["openai"], "gpt-5-codex", "responses"),
        ("openai", BUILTIN_PROVIDERS["openai"], "gpt-4.1", "chat-completions"),
        ("deepseek", BUILTIN_PROVIDERS["deepseek"], "o3", "chat-completions"),  # only OpenAI's own provider
        ("openai", ProviderSettings(wire_format="chat-completions"), "o3", "chat-completions"),
        ("local", ProviderSettings(wire_formats={"mine": "responses"}), "mine", "responses"),
        ("anthropic", BUILTIN_PROVIDERS["anthropic"], "o3", "chat-completions"),
    ],
)
def test_which_models_use_the_responses_api(provider: str, settings: ProviderSettings, model: str, wire: str) -> None:
    assert wire_format(provider, settings, model) == wire


def test_other_providers_reasoning_is_not_sent_and_tools_are_not_strict_unless_asked() -> None:
    request = GenerateRequest(
        model=MODEL,
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image", "url": "data:x"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "reasoning", "text": "anthropic thinking", "signature": "sig"},  # type: ignore[typeddict-unknown-key]
                    {"type": "text", "text": "hello"},
                ],
            },
        ],
        tools=[{"name": "t", "description": "d", "parameters": {"type": "object"}}],
        extra={"reasoning_effort": "low"},
    )
    body = build_body(request, "o4-mini", None)
    assert body["input"] == [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "hi"}, {"type": "input_image", "image_url": "data:x"}],
        },
        assistant("hello"),
    ]
    assert body["tools"] == [
        {"type": "function", "name": "t", "description": "d", "parameters": {"type": "object"}, "strict": False}
    ]
    assert body["reasoning"] == {"summary": "auto", "effort": "low"} and "reasoning_effort" not in body
    assert to_input([]) == []


async def test_reasoning_items_are_carried_within_the_turn_and_after_a_load(
    server: FakeProvider, tmp_path: Path
) -> None:
    server.script(
        Reply(
            events=[
                *rs_created(),
                *rs_reasoning(0, "rs_1", ["Plan the call."], "ENC-1"),
                *rs_call(1, "fc_1", "call_1", "bulk", ['{"size": 40', ', "label": "a"}']),
                rs_completed(),
            ]
        ),
        Reply(
            events=[
                *rs_created(),
                *rs_reasoning(0, "rs_2", ["Read it."], "ENC-2"),
                *rs_text(1, "msg_1", "Done ", "now."),
                rs_completed(),
            ]
        ),
        Reply(events=[*rs_created(), *rs_text(0, "msg_2", "second"), rs_completed()]),
        Reply(events=[*rs_created(), *rs_text(0, "msg_3", "third"), rs_completed()]),
    )
    env = {"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "test"}
    data = tmp_path / "data"
    async with run_daemon(tmp_path, data, model=MODEL, plugins=[PLUGIN], env=env) as daemon:
        with anyio.fail_after(30):
            session = await daemon.start()
            assert (await daemon.prompt(session, "go")).stop_reason == "end_turn"
            await daemon.conn.set_config_option(config_id="thought_level", session_id=session, value="high")
            assert (await daemon.prompt(session, "again")).stop_reason == "end_turn"
        thoughts = "".join(
            u["content"]["text"]
            for u in daemon.updates_in(0, session_id=session)
            if u["sessionUpdate"] == "agent_thought_chunk"
        )
        completed = [
            u
            for u in daemon.updates_in(0, session_id=session)
            if u.get("toolCallId") == "call_1" and u.get("status") == "completed"
        ]
    assert "Plan the call." in thoughts and "Read it." in thoughts  # summaries are shown as thoughts
    assert completed  # the tool ran
    async with run_daemon(tmp_path, data, model=MODEL, plugins=[PLUGIN], env=env, name="restarted") as daemon:
        with anyio.fail_after(30):
            await daemon.initialize()
            await daemon.load(session)
            assert (await daemon.prompt(session, "after the restart")).stop_reason == "end_turn"
    assert [r.path for r in server.requests] == ["/v1/responses"] * 4
    first, second, third, fourth = server.bodies()
    assert first["store"] is False and first["stream"] is True
    assert first["include"] == ["reasoning.encrypted_content"]
    assert first["reasoning"] == {"summary": "auto", "effort": "medium"}
    assert first["parallel_tool_calls"] is True
    assert [t["name"] for t in first["tools"]].count("bulk") == 1 and all(
        t["type"] == "function" for t in first["tools"]
    )
    assert first["instructions"].startswith("You are dsh")
    # the session note (date, mode; dsh.context._notes) follows the first message, once for the whole session
    note = first["input"][-1]
    assert note["role"] == "user" and note["content"][0] == {"type": "input_text", "text": '<context source="session">'}
    assert first["input"] == [user("go"), note]
    call = {"type": "function_call", "call_id": "call_1", "name": "bulk", "arguments": ARGUMENTS}
    output = {"type": "function_call_output", "call_id": "call_1", "output": bulk_text(40, "a")}
    turn_one = [user("go"), note, REASONING_1, call, output]
    assert second["input"] == turn_one  # step 1's reasoning item goes back, before its call
    assert second["reasoning"]["effort"] == "medium"
    turn_one_done = [*turn_one, REASONING_2, assistant("Done now.")]
    assert third["input"] == [*turn_one_done, user("again")]
    assert third["reasoning"]["effort"] == "high"  # the thought level
    assert fourth["input"] == [*turn_one_done, user("again"), assistant("second"), user("after the restart")]
    assert fourth["reasoning"]["effort"] == "high" and fourth["instructions"] == first["instructions"]
    assert json.dumps(fourth["input"]).count("encrypted_content") == 2  # the stored reasoning, sent again


# -- the stream, chunk by chunk (llm/stream against the loopback server) -----------------------------------------


async def _chunks(server: FakeProvider, *replies: Reply) -> list[Any]:
    from dsh.errors import LlmError
    from tests.providers._helpers import collect, openai_settings, running, user

    server.script(*replies)
    settings = openai_settings(server.url, retries=0)
    async with running({"openai": settings}) as ctx:
        try:
            return await collect(ctx, GenerateRequest(model=MODEL, messages=[user("hi")]))
        except LlmError as error:
            return [error]


async def test_the_chunks_of_a_reasoning_step_with_a_call(server: FakeProvider) -> None:
    chunks = await _chunks(
        server,
        Reply(
            events=[
                *rs_created(),
                *rs_reasoning(0, "rs_9", ["First part.", "Second part."], "ENC"),
                *rs_call(1, "fc_9", "call_9", "bulk", ['{"size"', ": 1}"]),
                rs_completed(input_tokens=50, output_tokens=7, reasoning=5, cached=32),
            ]
        ),
    )
    thoughts = "".join(c["text"] for c in chunks if c["type"] == "reasoning-delta")
    assert thoughts == "First part.\n\nSecond part."  # a blank line between summary parts
    [end] = [c for c in chunks if c["type"] == "block-end"]
    assert end["block"] == {
        "type": "reasoning",
        "text": "First part.\n\nSecond part.",
        "id": "rs_9",
        "encrypted_content": "ENC",
    }
    calls = [c for c in chunks if c["type"] == "tool-call-delta"]
    assert {c["id"] for c in calls} == {"call_9"} and "".join(c["arguments_delta"] for c in calls) == '{"size": 1}'
    assert chunks[-2:] == [
        {
            "type": "usage",
            "usage": {
                "input_tokens": 50,
                "output_tokens": 7,
                "total_tokens": 57,
                "cache_read_tokens": 32,
                "reasoning_tokens": 5,
            },
        },
        {"type": "finish", "reason": {"kind": "tool-calls"}},
    ]


async def test_an_incomplete_response_is_max_tokens(server: FakeProvider) -> None:
    incomplete = Event(
        {
            "type": "response.incomplete",
            "response": {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}},
        },
        event="response.incomplete",
    )
    chunks = await _chunks(server, Reply(events=[*rs_created(), *rs_text(0, "m", "cut"), incomplete]))
    assert chunks[-1] == {"type": "finish", "reason": {"kind": "max-tokens"}}


async def test_a_failed_response_for_length_is_a_context_overflow(server: FakeProvider) -> None:
    failed = Event(
        {
            "type": "response.failed",
            "response": {"status": "failed", "error": {"code": "context_length_exceeded", "message": "too long"}},
        },
        event="response.failed",
    )
    [error] = await _chunks(server, Reply(events=[*rs_created(), failed]))
    assert error.code == "CONTEXT_WINDOW_EXCEEDED" and "too long" in str(error)


async def test_a_stream_cut_before_completion_is_interrupted(server: FakeProvider) -> None:
    [*_, error] = await _chunks(server, Reply(events=[*rs_created(), *rs_text(0, "m", "partial")]))
    assert getattr(error, "code", None) == "STREAM_INTERRUPTED"
