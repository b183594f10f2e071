"""The ``openai`` wire format (Chat Completions streaming) against a real local server: what is streamed back,
what is sent, and a tool round trip through a real agent."""

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
from tests.providers._helpers import KEY, collect, openai_settings, running, user
from tests.support.provider_server import Event, FakeProvider, Reply
from tests.support.provider_wire import DONE, oa_chunk, oa_finish, oa_text_reply, oa_tool_delta, oa_usage

MODEL = "openai:test-model"


def request(*messages: Message, **fields: Any) -> GenerateRequest:
    return GenerateRequest(model=MODEL, messages=list(messages) or [user("hi")], **fields)


async def stream_once(server: FakeProvider, events: list[Event], **settings: Any) -> list[StreamChunk]:
    server.script(Reply(events=events))
    async with running({"openai": openai_settings(server.url, **settings)}) as ctx:
        return await collect(ctx, request())


def assembled(chunks: list[StreamChunk]) -> list[Any]:
    assembler = BlockAssembler()
    for chunk in chunks:
        assembler.feed(chunk)
    return list(assembler.message()["content"])


# -- what is streamed back ----------------------------------------------------------------------------------------


async def test_text_streams_as_deltas_then_usage_then_finish(server: FakeProvider) -> None:
    chunks = await stream_once(server, oa_text_reply("Hel", "lo", " world"))
    assert chunks == [
        {"type": "text-delta", "text": "Hel"},
        {"type": "text-delta", "text": "lo"},
        {"type": "text-delta", "text": " world"},
        {"type": "usage", "usage": {"input_tokens": 7, "output_tokens": 3, "total_tokens": 10}},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]
    assert [r.path for r in server.requests] == ["/v1/chat/completions"]


async def test_parallel_tool_calls_split_across_many_deltas_keep_stable_ids(server: FakeProvider) -> None:
    events = [
        oa_chunk({"role": "assistant", "content": None}),
        oa_tool_delta(0, "", "call_a", "read_file"),
        oa_tool_delta(0, '{"pa'),
        oa_tool_delta(1, "", "call_b", "grep"),
        oa_tool_delta(0, 'th": "a'),
        oa_tool_delta(1, '{"pattern"'),
        oa_tool_delta(0, '.txt"}'),
        oa_tool_delta(1, ': "x"}'),
        oa_finish("tool_calls"),
        oa_usage(20, 9),
        DONE,
    ]
    chunks = await stream_once(server, events)
    assert chunks[:7] == [
        {"type": "tool-call-delta", "id": "call_a", "name": "read_file", "arguments_delta": ""},
        {"type": "tool-call-delta", "id": "call_a", "arguments_delta": '{"pa'},
        {"type": "tool-call-delta", "id": "call_b", "name": "grep", "arguments_delta": ""},
        {"type": "tool-call-delta", "id": "call_a", "arguments_delta": 'th": "a'},
        {"type": "tool-call-delta", "id": "call_b", "arguments_delta": '{"pattern"'},
        {"type": "tool-call-delta", "id": "call_a", "arguments_delta": '.txt"}'},
        {"type": "tool-call-delta", "id": "call_b", "arguments_delta": ': "x"}'},
    ]
    assert chunks[-1] == {"type": "finish", "reason": {"kind": "tool-calls"}}
    assert assembled(chunks) == [
        {"type": "tool-call", "id": "call_a", "name": "read_file", "arguments": '{"path": "a.txt"}'},
        {"type": "tool-call", "id": "call_b", "name": "grep", "arguments": '{"pattern": "x"}'},
    ]


async def test_tool_calls_without_ids_get_one_stable_id_each_and_stop_means_tool_calls(server: FakeProvider) -> None:
    """Servers differ: no ids at all, and ``finish_reason: stop`` although tool calls were streamed."""
    events = [
        oa_tool_delta(0, '{"a": ', name="one"),
        oa_tool_delta(1, "{}", name="two"),
        oa_tool_delta(0, "1}"),
        oa_finish("stop"),
        DONE,
    ]
    chunks = await stream_once(server, events)
    ids = [c["id"] for c in chunks if c["type"] == "tool-call-delta"]
    assert ids[0] == ids[2] != ids[1]
    assert all(ids)
    assert assembled(chunks) == [
        {"type": "tool-call", "id": ids[0], "name": "one", "arguments": '{"a": 1}'},
        {"type": "tool-call", "id": ids[1], "name": "two", "arguments": "{}"},
    ]
    assert chunks[-1] == {"type": "finish", "reason": {"kind": "tool-calls"}}


async def test_a_new_id_on_the_same_index_starts_a_new_call(server: FakeProvider) -> None:
    """Some servers (Ollama) send each parallel call whole, all on index 0, each with its own id."""
    events = [
        oa_tool_delta(0, '{"q": 1}', "call_1", "search"),
        oa_tool_delta(0, '{"q": 2}', "call_2", "search"),
        oa_finish("tool_calls"),
        DONE,
    ]
    chunks = await stream_once(server, events)
    assert assembled(chunks) == [
        {"type": "tool-call", "id": "call_1", "name": "search", "arguments": '{"q": 1}'},
        {"type": "tool-call", "id": "call_2", "name": "search", "arguments": '{"q": 2}'},
    ]


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_deltas_come_before_the_text(server: FakeProvider, field: str) -> None:
    events = [
        oa_chunk({"role": "assistant", "content": ""}),
        oa_chunk({field: "Let me"}),
        oa_chunk({field: " think."}),
        oa_chunk({"content": "Four."}),
        oa_finish("stop"),
        DONE,
    ]
    chunks = await stream_once(server, events)
    assert chunks == [
        {"type": "reasoning-delta", "text": "Let me"},
        {"type": "reasoning-delta", "text": " think."},
        {"type": "text-delta", "text": "Four."},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]
    assert assembled(chunks) == [{"type": "reasoning", "text": "Let me think."}, {"type": "text", "text": "Four."}]


async def test_usage_is_mapped_with_cache_and_reasoning_details_and_comes_before_finish(server: FakeProvider) -> None:
    events = [
        oa_chunk({"content": "ok"}),
        oa_finish("stop"),
        oa_usage(
            100, 20, prompt_tokens_details={"cached_tokens": 64}, completion_tokens_details={"reasoning_tokens": 12}
        ),
        DONE,
    ]
    chunks = await stream_once(server, events)
    assert chunks[-2:] == [
        {
            "type": "usage",
            "usage": {
                "input_tokens": 100,
                "output_tokens": 20,
                "total_tokens": 120,
                "cache_read_tokens": 64,
                "reasoning_tokens": 12,
            },
        },
        {"type": "finish", "reason": {"kind": "stop"}},
    ]
    assert server.bodies()[0]["stream_options"] == {"include_usage": True}


async def test_deepseek_cache_hits_count_as_cache_reads(server: FakeProvider) -> None:
    events = [oa_chunk({"content": "ok"}), oa_finish("stop"), oa_usage(50, 5, prompt_cache_hit_tokens=40), DONE]
    chunks = await stream_once(server, events)
    assert chunks[-2] == {
        "type": "usage",
        "usage": {"input_tokens": 50, "output_tokens": 5, "total_tokens": 55, "cache_read_tokens": 40},
    }


async def test_length_is_max_tokens(server: FakeProvider) -> None:
    chunks = await stream_once(server, oa_text_reply("cut sh", finish="length"))
    assert chunks[-1] == {"type": "finish", "reason": {"kind": "max-tokens"}}


async def test_content_filter_is_a_clear_error_finish(server: FakeProvider) -> None:
    chunks = await stream_once(server, oa_text_reply("Sorr", finish="content_filter"))
    assert chunks[-2]["type"] == "usage"
    finish = chunks[-1]
    assert finish["type"] == "finish"
    assert finish["reason"]["kind"] == "error"
    assert finish["reason"]["code"] == "CONTENT_FILTER"
    assert "content filter" in finish["reason"]["message"]


async def test_an_error_object_in_the_stream_raises_with_its_message(server: FakeProvider) -> None:
    events = [oa_chunk({"content": "par"}), Event({"error": {"message": "upstream overloaded", "code": 502}})]
    server.script(Reply(events=events))
    async with running({"openai": openai_settings(server.url)}) as ctx:
        with pytest.raises(LlmError) as caught:
            await collect(ctx, request())
    assert caught.value.code == "PROVIDER_ERROR"
    assert "upstream overloaded" in caught.value.message
    assert len(server.requests) == 1


async def test_a_stream_without_a_finish_reason_is_an_error(server: FakeProvider) -> None:
    server.script(Reply(events=[oa_chunk({"content": "half"})]))
    async with running({"openai": openai_settings(server.url)}) as ctx:
        with pytest.raises(LlmError) as caught:
            await collect(ctx, request())
    assert caught.value.code == "STREAM_INTERRUPTED"


# -- what is sent ---------------------------------------------------------------------------------------------------

CONVERSATION: list[Message] = [
    user("Look at a.txt"),
    {
        "role": "assistant",
        "content": [
            {"type": "reasoning", "text": "I should read it."},
            {"type": "text", "text": "Reading."},
            {"type": "tool-call", "id": "call_1", "name": "read", "arguments": '{"path": "a.txt"}'},
            {"type": "tool-call", "id": "call_2", "name": "grep", "arguments": '{"pattern": "x"}'},
        ],
    },
    {
        "role": "user",
        "content": [
            {
                "type": "tool-result",
                "tool_call_id": "call_1",
                "content": [{"type": "text", "text": "hello"}],
                "is_error": False,
            }
        ],
    },
    {
        "role": "user",
        "content": [
            {
                "type": "tool-result",
                "tool_call_id": "call_2",
                "content": [{"type": "text", "text": "Error: bad"}],
                "is_error": True,
            }
        ],
    },
    {"role": "assistant", "content": [{"type": "reasoning", "text": "only thoughts"}]},
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


async def test_the_request_body_follows_the_chat_completions_format(server: FakeProvider) -> None:
    server.script(Reply(events=oa_text_reply("ok")))
    # the conversation holds an image: the model must take images, or the llm service sends it as a note
    async with running({"openai": openai_settings(server.url, vision={"test-model": True})}) as ctx:
        await collect(
            ctx,
            GenerateRequest(
                model=MODEL,
                messages=CONVERSATION,
                system="You are dsh.",
                tools=[READ_TOOL, {**READ_TOOL, "name": "grep", "strict": True}],  # type: ignore[list-item]
                temperature=0.2,
                max_tokens=100,
                stop=["END"],
                extra={"seed": 7},
            ),
        )
    assert server.bodies() == [
        {
            "model": "test-model",
            "messages": [
                {"role": "system", "content": "You are dsh."},
                {"role": "user", "content": "Look at a.txt"},
                {
                    "role": "assistant",
                    "content": "Reading.",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "read", "arguments": '{"path": "a.txt"}'},
                        },
                        {
                            "id": "call_2",
                            "type": "function",
                            "function": {"name": "grep", "arguments": '{"pattern": "x"}'},
                        },
                    ],
                },
                {"role": "tool", "tool_call_id": "call_1", "content": "hello"},
                {"role": "tool", "tool_call_id": "call_2", "content": "Error: bad"},
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "And this?"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                    ],
                },
            ],
            "stream": True,
            "stream_options": {"include_usage": True},
            "tools": [
                {"type": "function", "function": READ_TOOL},
                {"type": "function", "function": {**READ_TOOL, "name": "grep", "strict": True}},
            ],
            "temperature": 0.2,
            "max_tokens": 100,
            "stop": ["END"],
            "seed": 7,
        }
    ]


async def test_optional_fields_are_left_out_and_the_provider_max_tokens_applies(server: FakeProvider) -> None:
    server.script(Reply(events=oa_text_reply("ok")), Reply(events=oa_text_reply("ok")))
    async with running(
        {"openai": openai_settings(server.url), "capped": openai_settings(server.url, max_tokens=321)}
    ) as ctx:
        await collect(ctx, request())
        await collect(ctx, GenerateRequest(model="capped:m", messages=[user("hi")]))
    first, second = server.bodies()
    assert first == {
        "model": "test-model",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    assert second["model"] == "m"
    assert second["max_tokens"] == 321


async def test_headers_carry_the_bearer_key_and_configured_headers(server: FakeProvider) -> None:
    server.script(Reply(events=oa_text_reply("ok")))
    async with running({"openai": openai_settings(server.url, headers={"X-Title": "dsh"})}) as ctx:
        await collect(ctx, request())
    headers = server.requests[0].headers
    assert headers["authorization"] == f"Bearer {KEY}"
    assert headers["content-type"] == "application/json"
    assert headers["accept"] == "text/event-stream"
    assert headers["x-title"] == "dsh"


async def test_a_local_server_needs_no_key_and_gets_no_authorization(
    server: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DSH_TEST_NO_SUCH_KEY", raising=False)
    server.script(Reply(events=oa_text_reply("ok")))
    local = openai_settings(server.url, api_key=None, api_key_env="DSH_TEST_NO_SUCH_KEY", key_required=False)
    async with running({"local": local}) as ctx:
        chunks = await collect(ctx, GenerateRequest(model="local:llama3:8b", messages=[user("hi")]))
    assert chunks[-1] == {"type": "finish", "reason": {"kind": "stop"}}
    assert "authorization" not in server.requests[0].headers
    assert server.bodies()[0]["model"] == "llama3:8b"


# -- through a real agent ---------------------------------------------------------------------------------------------


class ReadArgs(BaseModel):
    path: str


async def test_a_tool_round_trip_through_an_agent(server: FakeProvider) -> None:
    ran: list[str] = []

    async def read(args: ReadArgs, execution: ToolExecution) -> str:
        ran.append(args.path)
        return f"contents of {args.path}"

    server.script(
        Reply(
            events=[
                oa_chunk({"role": "assistant", "content": "Let me look."}),
                oa_tool_delta(0, "", "call_a", "peek"),
                oa_tool_delta(1, "", "call_b", "peek"),
                oa_tool_delta(0, '{"path":'),
                oa_tool_delta(1, '{"path": "b'),
                oa_tool_delta(0, ' "a"}'),
                oa_tool_delta(1, '"}'),
                oa_finish("tool_calls"),
                oa_usage(30, 12),
                DONE,
            ]
        ),
        Reply(events=oa_text_reply("Both ", "read.")),
    )
    async with running({"openai": openai_settings(server.url)}) as ctx:
        ctx.tools.register(define_tool("peek", "Peek into a file.", ReadArgs, read))
        agent = ctx.agent_loop.create("a", AgentOptions(model=MODEL))
        agent.send([{"type": "text", "text": "read a and b"}])
        with anyio.fail_after(10):
            await agent.when_idle()
        events = agent.session.events
    assert ran == ["a", "b"]
    assert [e.data["reason"] for e in events if e.type == "turn/end"] == [{"kind": "completed"}]
    assert [(e.data["call_id"], e.data["arguments"]) for e in events if e.type == "tool/call"] == [
        ("call_a", '{"path": "a"}'),
        ("call_b", '{"path": "b"}'),
    ]
    assert [e.data["content"] for e in events if e.type == "assistant/message"][-1] == [
        {"type": "text", "text": "Both read."}
    ]
    assert next(e.data["usage"] for e in events if e.type == "usage") == {
        "input_tokens": 30,
        "output_tokens": 12,
        "total_tokens": 42,
    }
    first, second = server.bodies()
    assert {
        "type": "function",
        "function": {
            "name": "peek",
            "description": "Peek into a file.",
            "parameters": compact_schema(ReadArgs.model_json_schema()),
        },
    } in first["tools"]
    assert second["messages"][-3:] == [
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {"id": "call_a", "type": "function", "function": {"name": "peek", "arguments": '{"path": "a"}'}},
                {"id": "call_b", "type": "function", "function": {"name": "peek", "arguments": '{"path": "b"}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "contents of a"},
        {"role": "tool", "tool_call_id": "call_b", "content": "contents of b"},
    ]


async def test_max_tokens_and_content_filter_end_agent_turns_as_such(server: FakeProvider) -> None:
    server.script(
        Reply(events=oa_text_reply("cut", finish="length")), Reply(events=oa_text_reply("no", finish="content_filter"))
    )
    async with running({"openai": openai_settings(server.url)}) as ctx:
        agent = ctx.agent_loop.create("a", AgentOptions(model=MODEL))
        for prompt in ("one", "two"):
            agent.send([{"type": "text", "text": prompt}])
            with anyio.fail_after(10):
                await agent.when_idle()
        reasons = [e.data["reason"] for e in agent.session.events if e.type == "turn/end"]
    assert reasons[0] == {"kind": "max-tokens"}
    assert reasons[1]["kind"] == "error"
    assert reasons[1]["code"] == "CONTENT_FILTER"
