"""The ``anthropic`` wire format (Messages streaming) against a real local server: what is streamed back, what
is sent, and a tool round trip (with a signed thinking block sent back) through a real agent."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from dsh.errors import LlmError
from dsh.services.agents import AgentOptions
from dsh.services.llm import BlockAssembler, GenerateRequest, Message, StreamChunk
from dsh.services.tool_schema import compact_schema
from dsh.services.tools import ToolExecution, define_tool
from tests.providers._helpers import KEY, anthropic_settings, collect, running, user
from tests.support.provider_server import Event, FakeProvider, Reply
from tests.support.provider_wire import an_end, an_start, an_text, an_text_reply, an_thinking, an_tool

MODEL = "anthropic:claude-test"


def request(*messages: Message, **fields: Any) -> GenerateRequest:
    return GenerateRequest(model=MODEL, messages=list(messages) or [user("hi")], **fields)


async def stream_once(server: FakeProvider, events: list[Event], **settings: Any) -> list[StreamChunk]:
    server.script(Reply(events=events))
    async with running({"anthropic": anthropic_settings(server.url, **settings)}) as ctx:
        return await collect(ctx, request())


def assembled(chunks: list[StreamChunk]) -> list[Any]:
    assembler = BlockAssembler()
    for chunk in chunks:
        assembler.feed(chunk)
    return list(assembler.message()["content"])


# -- what is streamed back ----------------------------------------------------------------------------------------


async def test_text_streams_as_deltas_then_usage_then_finish(server: FakeProvider) -> None:
    chunks = await stream_once(server, an_text_reply("Hel", "lo", " world"))
    assert chunks == [
        {"type": "text-delta", "text": "Hel"},
        {"type": "text-delta", "text": "lo"},
        {"type": "text-delta", "text": " world"},
        {"type": "usage", "usage": {"input_tokens": 11, "output_tokens": 5}},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]
    assert [r.path for r in server.requests] == ["/v1/messages"]


async def test_parallel_tool_use_split_across_many_json_deltas(server: FakeProvider) -> None:
    events = [
        an_start(),
        *an_text(0, "Checking."),
        *an_tool(1, "toolu_a", "read_file", ['{"pa', 'th": "a', '.txt"}']),
        *an_tool(2, "toolu_b", "grep", ["", '{"pattern"', ': "x"}']),
        *an_end("tool_use", 40),
    ]
    chunks = await stream_once(server, events)
    assert chunks[:9] == [
        {"type": "text-delta", "text": "Checking."},
        {"type": "tool-call-delta", "id": "toolu_a", "name": "read_file", "arguments_delta": ""},
        {"type": "tool-call-delta", "id": "toolu_a", "arguments_delta": '{"pa'},
        {"type": "tool-call-delta", "id": "toolu_a", "arguments_delta": 'th": "a'},
        {"type": "tool-call-delta", "id": "toolu_a", "arguments_delta": '.txt"}'},
        {"type": "tool-call-delta", "id": "toolu_b", "name": "grep", "arguments_delta": ""},
        {"type": "tool-call-delta", "id": "toolu_b", "arguments_delta": ""},
        {"type": "tool-call-delta", "id": "toolu_b", "arguments_delta": '{"pattern"'},
        {"type": "tool-call-delta", "id": "toolu_b", "arguments_delta": ': "x"}'},
    ]
    assert chunks[-2:] == [
        {"type": "usage", "usage": {"input_tokens": 11, "output_tokens": 40}},
        {"type": "finish", "reason": {"kind": "tool-calls"}},
    ]
    assert assembled(chunks) == [
        {"type": "text", "text": "Checking."},
        {"type": "tool-call", "id": "toolu_a", "name": "read_file", "arguments": '{"path": "a.txt"}'},
        {"type": "tool-call", "id": "toolu_b", "name": "grep", "arguments": '{"pattern": "x"}'},
    ]


async def test_thinking_streams_as_reasoning_and_ends_with_its_signature(server: FakeProvider) -> None:
    events = [an_start(), *an_thinking(0, ["Let me", " think."], "sig-123"), *an_text(1, "Four."), *an_end()]
    chunks = await stream_once(server, events)
    assert chunks[:4] == [
        {"type": "reasoning-delta", "text": "Let me"},
        {"type": "reasoning-delta", "text": " think."},
        {"type": "block-end", "block": {"type": "reasoning", "text": "Let me think.", "signature": "sig-123"}},
        {"type": "text-delta", "text": "Four."},
    ]
    assert assembled(chunks) == [
        {"type": "reasoning", "text": "Let me think.", "signature": "sig-123"},
        {"type": "text", "text": "Four."},
    ]


async def test_redacted_thinking_is_kept_as_a_reasoning_block(server: FakeProvider) -> None:
    events = [
        an_start(),
        Event(
            {"type": "content_block_start", "index": 0, "content_block": {"type": "redacted_thinking", "data": "ENC"}},
            "content_block_start",
        ),
        Event({"type": "content_block_stop", "index": 0}, "content_block_stop"),
        *an_text(1, "ok"),
        *an_end(),
    ]
    chunks = await stream_once(server, events)
    assert chunks[0] == {"type": "block-end", "block": {"type": "reasoning", "text": "", "redacted": "ENC"}}


async def test_usage_counts_cached_prompt_tokens_as_input_and_apart(server: FakeProvider) -> None:
    events = [an_start(input_tokens=5, cache_read=100, cache_write=20), *an_text(0, "ok"), *an_end(output_tokens=9)]
    chunks = await stream_once(server, events)
    assert chunks[-2:] == [
        {
            "type": "usage",
            "usage": {"input_tokens": 125, "output_tokens": 9, "cache_read_tokens": 100, "cache_write_tokens": 20},
        },
        {"type": "finish", "reason": {"kind": "stop"}},
    ]


async def test_max_tokens_stop_is_max_tokens(server: FakeProvider) -> None:
    chunks = await stream_once(server, an_text_reply("cut sh", stop_reason="max_tokens"))
    assert chunks[-1] == {"type": "finish", "reason": {"kind": "max-tokens"}}


async def test_an_error_event_raises_with_its_message(server: FakeProvider) -> None:
    events = [
        an_start(),
        *an_text(0, "par"),
        Event({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, "error"),
    ]
    server.script(Reply(events=events))
    async with running({"anthropic": anthropic_settings(server.url)}) as ctx:
        with pytest.raises(LlmError) as caught:
            await collect(ctx, request())
    assert caught.value.code == "OVERLOADED"
    assert "Overloaded" in caught.value.message
    assert len(server.requests) == 1, "an error after the first byte is never retried"


async def test_a_stream_without_message_stop_is_an_error(server: FakeProvider) -> None:
    server.script(Reply(events=[an_start(), *an_text(0, "half")]))
    async with running({"anthropic": anthropic_settings(server.url)}) as ctx:
        with pytest.raises(LlmError) as caught:
            await collect(ctx, request())
    assert caught.value.code == "STREAM_INTERRUPTED"


# -- what is sent ---------------------------------------------------------------------------------------------------

CONVERSATION: list[Message] = [
    user("Look at a.txt"),
    {
        "role": "assistant",
        "content": [
            {"type": "reasoning", "text": "I should read it.", "signature": "sig-1"},  # type: ignore[typeddict-unknown-key]
            {"type": "reasoning", "text": "unsigned thoughts are not sent"},
            {"type": "text", "text": "Reading."},
            {"type": "tool-call", "id": "toolu_1", "name": "read", "arguments": '{"path": "a.txt"}'},
            {"type": "tool-call", "id": "toolu_2", "name": "grep", "arguments": "not json"},
        ],
    },
    {
        "role": "user",
        "content": [
            {
                "type": "tool-result",
                "tool_call_id": "toolu_1",
                "content": [{"type": "text", "text": "hello"}],
                "is_error": False,
            }
        ],
    },
    {"role": "user", "content": [{"type": "text", "text": "<steering>"}]},
    {
        "role": "user",
        "content": [
            {
                "type": "tool-result",
                "tool_call_id": "toolu_2",
                "content": [{"type": "text", "text": "Error: bad"}],
                "is_error": True,
            }
        ],
    },
    {"role": "assistant", "content": [{"type": "text", "text": ""}]},
    {
        "role": "user",
        "content": [{"type": "text", "text": "And this?"}, {"type": "image", "url": "data:image/png;base64,AAAA"}],
    },
]
READ_TOOL = {
    "name": "read",
    "description": "Read a file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
}


async def test_the_request_body_follows_the_messages_format(server: FakeProvider) -> None:
    server.script(Reply(events=an_text_reply("ok")))
    async with running({"anthropic": anthropic_settings(server.url)}) as ctx:
        await collect(
            ctx,
            GenerateRequest(
                model=MODEL,
                messages=CONVERSATION,
                system="You are dsh.",
                tools=[READ_TOOL],  # type: ignore[list-item]
                temperature=0.2,
                stop=["END"],
                extra={"thinking": {"type": "enabled", "budget_tokens": 1024}},
            ),
        )
    assert server.bodies() == [
        {
            "model": "claude-test",
            "max_tokens": 8192,
            "messages": [
                {  # the second-to-last user message: the previous step's breakpoint, read from the cache
                    "role": "user",
                    "content": [{"type": "text", "text": "Look at a.txt", "cache_control": {"type": "ephemeral"}}],
                },
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "I should read it.", "signature": "sig-1"},
                        {"type": "text", "text": "Reading."},
                        {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a.txt"}},
                        {"type": "tool_use", "id": "toolu_2", "name": "grep", "input": {}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_1",
                            "content": [{"type": "text", "text": "hello"}],
                        },
                        {
                            "type": "tool_result",
                            "tool_use_id": "toolu_2",
                            "content": [{"type": "text", "text": "Error: bad"}],
                            "is_error": True,
                        },
                        {"type": "text", "text": "<steering>"},
                        {"type": "text", "text": "And this?"},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
                            "cache_control": {"type": "ephemeral"},
                        },
                    ],
                },
            ],
            "stream": True,
            "system": [{"type": "text", "text": "You are dsh.", "cache_control": {"type": "ephemeral"}}],
            "tools": [
                {
                    "name": "read",
                    "description": "Read a file",
                    "input_schema": READ_TOOL["parameters"],
                    "cache_control": {"type": "ephemeral"},
                }
            ],
            "temperature": 0.2,
            "stop_sequences": ["END"],
            "thinking": {"type": "enabled", "budget_tokens": 1024},
        }
    ]


async def test_max_tokens_comes_from_the_request_else_the_provider(server: FakeProvider) -> None:
    server.script(Reply(events=an_text_reply("ok")), Reply(events=an_text_reply("ok")))
    async with running({"anthropic": anthropic_settings(server.url, max_tokens=2048)}) as ctx:
        await collect(ctx, request())
        await collect(ctx, request(max_tokens=77))
    assert [b["max_tokens"] for b in server.bodies()] == [2048, 77]


async def test_headers_carry_the_api_key_and_version(server: FakeProvider) -> None:
    server.script(Reply(events=an_text_reply("ok")))
    async with running({"anthropic": anthropic_settings(server.url, headers={"anthropic-beta": "x"})}) as ctx:
        await collect(ctx, request())
    headers = server.requests[0].headers
    assert headers["x-api-key"] == KEY
    assert headers["anthropic-version"] == "2023-06-01"
    assert headers["anthropic-beta"] == "x"
    assert headers["content-type"] == "application/json"
    assert "authorization" not in headers


# -- through a real agent ---------------------------------------------------------------------------------------------


class ReadArgs(BaseModel):
    path: str


async def test_a_tool_round_trip_through_an_agent_sends_back_the_signed_thinking(server: FakeProvider) -> None:
    ran: list[str] = []

    async def read(args: ReadArgs, execution: ToolExecution) -> str:
        ran.append(args.path)
        return f"contents of {args.path}"

    server.script(
        Reply(
            events=[
                an_start(),
                *an_thinking(0, ["Two files", "."], "sig-xyz"),
                *an_tool(1, "toolu_a", "peek", ['{"path":', ' "a"}']),
                *an_tool(2, "toolu_b", "peek", ['{"path": "b"}']),
                *an_end("tool_use"),
            ]
        ),
        Reply(events=an_text_reply("Both ", "read.")),
    )
    async with running({"anthropic": anthropic_settings(server.url)}) as ctx:
        ctx.tools.register(define_tool("peek", "Peek into a file.", ReadArgs, read))
        agent = ctx.agent_loop.create("a", AgentOptions(model=MODEL))
        agent.send([{"type": "text", "text": "read a and b"}])
        with anyio.fail_after(10):
            await agent.when_idle()
        events = agent.session.events
    assert ran == ["a", "b"]
    assert [e.data["reason"] for e in events if e.type == "turn/end"] == [{"kind": "completed"}]
    assert [e.data["content"] for e in events if e.type == "assistant/message"][-1] == [
        {"type": "text", "text": "Both read."}
    ]
    first, second = server.bodies()
    assert first["tools"][-1] == {  # the last tool carries the prompt-cache breakpoint
        "name": "peek",
        "description": "Peek into a file.",
        "input_schema": compact_schema(ReadArgs.model_json_schema()),
        "cache_control": {"type": "ephemeral"},
    }
    assert second["messages"][-2:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Two files.", "signature": "sig-xyz"},
                {"type": "tool_use", "id": "toolu_a", "name": "peek", "input": {"path": "a"}},
                {"type": "tool_use", "id": "toolu_b", "name": "peek", "input": {"path": "b"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_a",
                    "content": [{"type": "text", "text": "contents of a"}],
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_b",
                    "content": [{"type": "text", "text": "contents of b"}],
                    "cache_control": {"type": "ephemeral"},  # the last user turn's breakpoint
                },
            ],
        },
    ]


async def test_max_tokens_ends_an_agent_turn_as_max_tokens(server: FakeProvider) -> None:
    server.script(Reply(events=an_text_reply("cut", stop_reason="max_tokens")))
    async with running({"anthropic": anthropic_settings(server.url)}) as ctx:
        agent = ctx.agent_loop.create("a", AgentOptions(model=MODEL))
        agent.send([{"type": "text", "text": "go"}])
        with anyio.fail_after(10):
            await agent.when_idle()
        reasons = [e.data["reason"] for e in agent.session.events if e.type == "turn/end"]
    assert reasons == [{"kind": "max-tokens"}]
