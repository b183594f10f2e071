"""The ``scripted:<name-or-path>`` model: each call consumes the next step of a script."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from dsh.app import load_core
from dsh.errors import LlmError
from dsh.kernel import App, CancelToken, Context
from dsh.providers.scripted import scripted_plugin
from dsh.services.agents import AgentOptions
from dsh.services.llm import GenerateRequest, Message, StreamChunk, llm_plugin
from dsh.services.sessions import SessionEvent
from dsh.services.tools import ToolExecution, define_tool

HI: Message = {"role": "user", "content": [{"type": "text", "text": "hi"}]}


def request(name: str, signal: CancelToken | None = None) -> GenerateRequest:
    return GenerateRequest(model=f"scripted:{name}", messages=[HI], signal=signal)


async def collect(ctx: Context, name: str, signal: CancelToken | None = None) -> list[StreamChunk]:
    stream = await ctx.llm.stream(request(name, signal))
    return [chunk async for chunk in stream]


def types(chunks: list[StreamChunk]) -> list[str]:
    return [chunk["type"] for chunk in chunks]


def joined(chunks: list[StreamChunk], kind: str) -> str:
    raw: list[Any] = chunks
    return "".join(chunk["text"] for chunk in raw if chunk["type"] == kind)


def tool_calls(chunks: list[StreamChunk]) -> list[dict[str, Any]]:
    raw: list[Any] = chunks
    return [chunk for chunk in raw if chunk["type"] == "tool-call-delta"]


def finish(chunks: list[StreamChunk]) -> dict[str, Any]:
    last: Any = chunks[-1]
    assert last["type"] == "finish"
    return dict(last["reason"])


# -- registration and script sources ------------------------------------------------------------------------


async def test_scripted_plugin_serves_every_scripted_model_name(core: Context) -> None:
    assert "scripted:*" in core.llm.models()
    assert core.llm.resolve("scripted:anything") is core.scripted_models


async def test_inline_script_from_plugin_config_is_reachable_by_name() -> None:
    async with App() as application:
        load_core(application.ctx, scripts={"greet": [{"text": "hello from config"}]})

        chunks = await collect(application.ctx, "greet")

    assert joined(chunks, "text-delta") == "hello from config"


async def test_inline_script_added_at_runtime_is_reachable_by_name(core: Context) -> None:
    core.scripted_models.add("x", [{"text": "added later"}])

    assert joined(await collect(core, "x"), "text-delta") == "added later"


async def test_yaml_script_file_loads(core: Context, tmp_path: Path) -> None:
    path = tmp_path / "script.yaml"
    path.write_text(
        "- text: from yaml\n- tool_calls:\n    - name: lookup\n      arguments: {q: 1}\n",
        encoding="utf-8",
    )

    first = await collect(core, str(path))
    second = await collect(core, str(path))

    assert joined(first, "text-delta") == "from yaml"
    [call] = tool_calls(second)
    assert call["name"] == "lookup"
    assert json.loads(call["arguments_delta"]) == {"q": 1}


async def test_json_script_file_loads(core: Context, tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(json.dumps([{"reasoning": "hmm", "text": "from json"}]), encoding="utf-8")

    chunks = await collect(core, str(path))

    assert joined(chunks, "reasoning-delta") == "hmm"
    assert joined(chunks, "text-delta") == "from json"


async def test_missing_script_file_is_bad_script_naming_the_path(core: Context, tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "missing.yaml"

    with pytest.raises(LlmError) as info:
        await collect(core, str(path))

    assert info.value.code == "BAD_SCRIPT"
    assert str(path) in info.value.message


async def test_malformed_json_script_file_is_bad_script(core: Context, tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text("[{", encoding="utf-8")

    with pytest.raises(LlmError) as info:
        await collect(core, str(path))

    assert info.value.code == "BAD_SCRIPT"


# -- validation ---------------------------------------------------------------------------------------------


def assert_bad_script_at_step(error: LlmError, step: int) -> None:
    assert error.code == "BAD_SCRIPT"
    assert re.search(rf"\bstep {step}\b", error.message), error.message


async def test_unknown_step_key_is_bad_script_naming_the_step(core: Context) -> None:
    with pytest.raises(LlmError) as info:
        core.scripted_models.add("typo", [{"text": "fine"}, {"txet": "typo"}])

    assert_bad_script_at_step(info.value, 2)


@pytest.mark.parametrize(
    "bad_step",
    [
        {"text": 5},
        {"reasoning": ["a"]},
        {"tool_calls": "lookup"},
        {"tool_calls": [{"name": 3}]},
        {"tool_calls": [{"arguments": {}}]},
        {"tool_calls": [{"name": "t", "colour": "red"}]},
        {"finish": "done"},
        {"hang": [True]},
        {"delay": "soon"},
        {"error": 42},
    ],
)
async def test_wrongly_typed_step_is_bad_script_naming_the_step(core: Context, bad_step: dict[str, Any]) -> None:
    with pytest.raises(LlmError) as info:
        core.scripted_models.add("bad", [{"text": "ok"}, {"text": "ok"}, bad_step])

    assert_bad_script_at_step(info.value, 3)


async def test_bad_step_in_a_file_is_bad_script_naming_the_step(core: Context, tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("- text: ok\n- texts: oops\n", encoding="utf-8")

    with pytest.raises(LlmError) as info:
        await collect(core, str(path))

    assert_bad_script_at_step(info.value, 2)


async def test_script_that_is_not_a_list_is_bad_script(core: Context) -> None:
    with pytest.raises(LlmError) as info:
        core.scripted_models.add("notalist", {"text": "hi"})  # type: ignore[arg-type]

    assert info.value.code == "BAD_SCRIPT"


async def test_bad_inline_script_in_plugin_config_is_rejected_when_the_plugin_loads(app: App) -> None:
    app.ctx.plugin(llm_plugin)

    with pytest.raises(LlmError) as info:
        app.ctx.plugin(scripted_plugin, {"scripts": {"s": [{"unknown": 1}]}})

    assert_bad_script_at_step(info.value, 1)


# -- what a step streams ------------------------------------------------------------------------------------


async def test_step_streams_reasoning_then_text_then_tool_calls_then_usage_then_finish(core: Context) -> None:
    core.scripted_models.add(
        "x",
        [
            {
                "reasoning": "think hard",
                "text": "the answer",
                "tool_calls": [{"name": "a", "arguments": {"n": 1}}, {"name": "b"}],
            }
        ],
    )

    chunks = await collect(core, "x")

    assert types(chunks) == [
        "reasoning-delta",
        "reasoning-delta",
        "text-delta",
        "text-delta",
        "tool-call-delta",
        "tool-call-delta",
        "usage",
        "finish",
    ]
    assert [c["text"] for c in chunks if c["type"] == "reasoning-delta"] == ["think ", "hard"]
    assert [c["text"] for c in chunks if c["type"] == "text-delta"] == ["the ", "answer"]
    assert [call["name"] for call in tool_calls(chunks)] == ["a", "b"]


async def test_text_deltas_keep_whitespace_so_they_concatenate_to_the_script_text(core: Context) -> None:
    text = "  spaced   out\nlines \t"
    core.scripted_models.add("x", [{"text": text, "reasoning": " r  1 "}])

    chunks = await collect(core, "x")

    assert joined(chunks, "text-delta") == text
    assert joined(chunks, "reasoning-delta") == " r  1 "


async def test_tool_call_dict_arguments_become_a_json_string(core: Context) -> None:
    arguments = {"path": "a/b.txt", "lines": [1, 2], "deep": {"ok": True}}
    core.scripted_models.add("x", [{"tool_calls": [{"name": "read", "arguments": arguments}]}])

    [call] = tool_calls(await collect(core, "x"))

    assert isinstance(call["arguments_delta"], str)
    assert json.loads(call["arguments_delta"]) == arguments


async def test_tool_call_raw_string_arguments_pass_through_untouched(core: Context) -> None:
    raw = '{"unterminated": '
    core.scripted_models.add("x", [{"tool_calls": [{"name": "read", "arguments": raw}]}])

    [call] = tool_calls(await collect(core, "x"))

    assert call["arguments_delta"] == raw


async def test_tool_call_without_arguments_sends_an_empty_json_object(core: Context) -> None:
    core.scripted_models.add("x", [{"tool_calls": [{"name": "noargs"}]}])

    [call] = tool_calls(await collect(core, "x"))

    assert json.loads(call["arguments_delta"]) == {}


async def test_explicit_tool_call_id_is_honoured(core: Context) -> None:
    core.scripted_models.add("x", [{"tool_calls": [{"name": "t", "id": "my-call"}]}])

    [call] = tool_calls(await collect(core, "x"))

    assert call["id"] == "my-call"


async def test_default_tool_call_ids_are_distinct_within_and_across_steps(core: Context) -> None:
    core.scripted_models.add("x", [{"tool_calls": [{"name": "a"}, {"name": "b"}]}, {"tool_calls": [{"name": "c"}]}])

    ids = [call["id"] for call in tool_calls(await collect(core, "x")) + tool_calls(await collect(core, "x"))]

    assert all(isinstance(i, str) and i for i in ids)
    assert len(set(ids)) == 3


async def test_default_tool_call_ids_stay_distinct_when_two_callers_interleave(core: Context) -> None:
    core.scripted_models.add("x", [{"text": "first", "tool_calls": [{"name": "a"}]}, {"tool_calls": [{"name": "b"}]}])
    first = await core.llm.stream(request("x"))
    opening = await first.__anext__()  # step 1 is now consumed, its tool call not yet streamed
    assert opening["type"] == "text-delta"

    second = await collect(core, "x")
    rest = [chunk async for chunk in first]

    [call_a] = tool_calls(rest)
    [call_b] = tool_calls(second)
    assert call_a["id"] != call_b["id"]


async def test_finish_defaults_to_stop_without_tool_calls(core: Context) -> None:
    core.scripted_models.add("x", [{"text": "plain"}])

    assert finish(await collect(core, "x")) == {"kind": "stop"}


async def test_finish_defaults_to_tool_calls_with_tool_calls(core: Context) -> None:
    core.scripted_models.add("x", [{"tool_calls": [{"name": "t"}]}])

    assert finish(await collect(core, "x")) == {"kind": "tool-calls"}


async def test_finish_max_tokens_ends_with_a_max_tokens_finish(core: Context) -> None:
    core.scripted_models.add("x", [{"text": "cut", "finish": "max-tokens"}])

    chunks = await collect(core, "x")

    assert finish(chunks) == {"kind": "max-tokens"}
    assert types(chunks)[-2:] == ["usage", "finish"]


async def test_finish_error_ends_with_an_error_finish_carrying_message_and_code(core: Context) -> None:
    core.scripted_models.add("x", [{"text": "oops", "finish": "error"}])

    reason = finish(await collect(core, "x"))

    assert reason["kind"] == "error"
    assert isinstance(reason["message"], str) and reason["message"]
    assert isinstance(reason["code"], str) and reason["code"]


async def test_every_step_ends_with_exactly_one_usage_then_one_finish(core: Context) -> None:
    core.scripted_models.add("x", [{}, {"text": "a b"}, {"tool_calls": [{"name": "t"}]}])

    for _ in range(3):
        chunks = await collect(core, "x")
        assert types(chunks).count("usage") == 1
        assert types(chunks).count("finish") == 1
        assert types(chunks)[-2:] == ["usage", "finish"]


async def test_error_string_makes_the_stream_raise_with_that_message(core: Context) -> None:
    core.scripted_models.add("x", [{"error": "the model fell over"}])

    with pytest.raises(Exception, match="the model fell over") as info:
        await collect(core, "x")

    assert getattr(info.value, "message", None) == "the model fell over"


async def test_error_object_makes_the_stream_raise_with_its_message_and_code(core: Context) -> None:
    core.scripted_models.add("x", [{"text": "partial", "error": {"message": "rate limited", "code": "RATE_LIMIT"}}])

    with pytest.raises(Exception, match="rate limited") as info:
        await collect(core, "x")

    assert getattr(info.value, "code", None) == "RATE_LIMIT"


# -- the cursor ---------------------------------------------------------------------------------------------


async def test_each_call_consumes_the_next_step(core: Context) -> None:
    core.scripted_models.add("x", [{"text": "one"}, {"text": "two"}, {"text": "three"}])

    texts = [joined(await collect(core, "x"), "text-delta") for _ in range(3)]

    assert texts == ["one", "two", "three"]
    assert core.scripted_models.remaining("x") == 0


async def test_exhausted_script_raises_script_exhausted(core: Context) -> None:
    core.scripted_models.add("x", [{"text": "only"}])
    await collect(core, "x")

    with pytest.raises(LlmError) as info:
        await collect(core, "x")

    assert info.value.code == "SCRIPT_EXHAUSTED"


async def test_empty_script_is_exhausted_on_the_first_call(core: Context) -> None:
    core.scripted_models.add("x", [])

    with pytest.raises(LlmError) as info:
        await collect(core, "x")

    assert info.value.code == "SCRIPT_EXHAUSTED"


async def test_cursors_are_per_script(core: Context) -> None:
    core.scripted_models.add("x", [{"text": "x1"}, {"text": "x2"}])
    core.scripted_models.add("y", [{"text": "y1"}])

    first_x = joined(await collect(core, "x"), "text-delta")
    first_y = joined(await collect(core, "y"), "text-delta")
    second_x = joined(await collect(core, "x"), "text-delta")

    assert (first_x, first_y, second_x) == ("x1", "y1", "x2")


async def test_file_script_cursor_persists_across_calls(core: Context, tmp_path: Path) -> None:
    path = tmp_path / "two.json"
    path.write_text(json.dumps([{"text": "one"}, {"text": "two"}]), encoding="utf-8")

    texts = [joined(await collect(core, str(path)), "text-delta") for _ in range(2)]

    assert texts == ["one", "two"]
    with pytest.raises(LlmError) as info:
        await collect(core, str(path))
    assert info.value.code == "SCRIPT_EXHAUSTED"


async def test_re_adding_a_script_replaces_it_and_restarts_its_cursor(core: Context) -> None:
    core.scripted_models.add("x", [{"text": "old"}])
    await collect(core, "x")

    core.scripted_models.add("x", [{"text": "new"}])

    assert joined(await collect(core, "x"), "text-delta") == "new"


# -- timing: delay and hang ---------------------------------------------------------------------------------


async def test_delay_sleeps_between_chunks(core: Context) -> None:
    delay = 0.05
    core.scripted_models.add("x", [{"text": "a b c", "delay": delay}])

    stream = await core.llm.stream(request("x"))
    arrivals = [anyio.current_time() async for chunk in stream if chunk["type"] == "text-delta"]

    gaps = [later - earlier for earlier, later in itertools.pairwise(arrivals)]
    assert len(gaps) == 2
    assert all(gap >= delay - 0.001 for gap in gaps), gaps


async def test_delay_is_cut_short_when_the_signal_is_aborted(core: Context) -> None:
    core.scripted_models.add("x", [{"text": "a b", "delay": 30}])
    signal = CancelToken()
    received: list[StreamChunk] = []
    got_first = anyio.Event()

    async def consume() -> None:
        stream = await core.llm.stream(request("x", signal))
        async for chunk in stream:
            received.append(chunk)
            got_first.set()

    with anyio.fail_after(1):
        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            await got_first.wait()
            await anyio.wait_all_tasks_blocked()
            assert types(received) == ["text-delta"]  # parked in the 30 s delay
            signal.abort()

    assert received[-1]["type"] == "finish"


async def test_hang_streams_nothing_until_aborted_then_finishes_aborted(core: Context) -> None:
    core.scripted_models.add("x", [{"hang": True, "text": "never said"}])
    signal = CancelToken()
    received: list[StreamChunk] = []
    opened = anyio.Event()

    async def consume() -> None:
        stream = await core.llm.stream(request("x", signal))
        opened.set()
        async for chunk in stream:
            received.append(chunk)  # noqa: PERF401 - appended one by one so the test sees partial progress

    with anyio.fail_after(1):
        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            await opened.wait()
            await anyio.wait_all_tasks_blocked()
            assert received == []
            signal.abort()

    assert received == [{"type": "finish", "reason": {"kind": "aborted"}}]


# -- end to end through an agent ----------------------------------------------------------------------------


def of_type(events: Any, kind: str) -> list[SessionEvent]:
    return [event for event in events if event.type == kind]


async def run_prompt(core: Context, agent_id: str, model: str, text: str = "hi") -> Any:
    agent = core.agent_loop.create(agent_id, AgentOptions(model=model))
    agent.send([{"type": "text", "text": text}])
    with anyio.fail_after(1):
        await agent.when_idle()
    return agent


async def test_agent_logs_the_scripted_text_as_the_assistant_message(core: Context) -> None:
    core.scripted_models.add("x", [{"text": "scripted  reply\n"}])

    agent = await run_prompt(core, "a", "scripted:x")

    messages = of_type(agent.session.events, "assistant/message")
    assert [m.data["content"] for m in messages] == [[{"type": "text", "text": "scripted  reply\n"}]]
    assert agent.session.last("turn/end").data["reason"] == {"kind": "completed"}


class LookupArgs(BaseModel):
    q: str


async def test_agent_runs_scripted_tool_calls_and_continues_with_the_next_step(core: Context) -> None:
    seen: list[str] = []

    async def lookup(args: LookupArgs, execution: ToolExecution) -> str:
        seen.append(args.q)
        return f"found {args.q}"

    core.tools.register(define_tool("lookup", "Look something up.", LookupArgs, lookup))
    core.scripted_models.add(
        "x",
        [
            {"text": "let me check", "tool_calls": [{"id": "c1", "name": "lookup", "arguments": {"q": "cats"}}]},
            {"text": "cats are fine"},
        ],
    )

    agent = await run_prompt(core, "a", "scripted:x")

    events = agent.session.events
    [call] = of_type(events, "tool/call")
    [result] = of_type(events, "tool/result")
    assert call.data["call_id"] == "c1"
    assert call.data["name"] == "lookup"
    assert json.loads(call.data["arguments"]) == {"q": "cats"}
    assert result.data["call_id"] == "c1"
    assert result.data["is_error"] is False
    assert result.data["content"] == [{"type": "text", "text": "found cats"}]
    assert seen == ["cats"]
    messages = [m.data["content"] for m in of_type(events, "assistant/message")]
    assert messages[-1] == [{"type": "text", "text": "cats are fine"}]
    assert core.scripted_models.remaining("x") == 0


async def test_agents_sharing_a_script_share_its_cursor(core: Context) -> None:
    core.scripted_models.add("x", [{"text": "for the first"}, {"text": "for the second"}])

    first = await run_prompt(core, "a", "scripted:x")
    second = await run_prompt(core, "b", "scripted:x")

    assert of_type(first.session.events, "assistant/message")[0].data["content"][0]["text"] == "for the first"
    assert of_type(second.session.events, "assistant/message")[0].data["content"][0]["text"] == "for the second"


async def test_agent_turn_fails_with_the_scripted_error_code(core: Context) -> None:
    core.scripted_models.add("x", [{"error": {"message": "provider down", "code": "PROVIDER_DOWN"}}])

    agent = await run_prompt(core, "a", "scripted:x")

    [error] = of_type(agent.session.events, "error")
    assert error.data["code"] == "PROVIDER_DOWN"
    assert error.data["message"] == "provider down"
    reason = agent.session.last("turn/end").data["reason"]
    assert (reason["kind"], reason["code"]) == ("error", "PROVIDER_DOWN")


async def test_agent_turn_on_an_exhausted_script_fails_with_script_exhausted(core: Context) -> None:
    core.scripted_models.add("x", [])

    agent = await run_prompt(core, "a", "scripted:x")

    [error] = of_type(agent.session.events, "error")
    assert error.data["code"] == "SCRIPT_EXHAUSTED"


async def test_agent_turn_ends_max_tokens_on_a_max_tokens_finish(core: Context) -> None:
    core.scripted_models.add("x", [{"text": "trunc", "finish": "max-tokens"}])

    agent = await run_prompt(core, "a", "scripted:x")

    assert agent.session.last("turn/end").data["reason"] == {"kind": "max-tokens"}


async def test_agent_abort_releases_a_hanging_step(core: Context) -> None:
    from dsh import events as ev

    core.scripted_models.add("x", [{"hang": True}])
    agent = core.agent_loop.create("a", AgentOptions(model="scripted:x"))
    step_started = anyio.Event()
    core.on(ev.AGENT_STEP_START, lambda *_: step_started.set())

    agent.send([{"type": "text", "text": "hi"}])
    with anyio.fail_after(1):
        await step_started.wait()
        agent.abort("stop it")
        await agent.when_idle()

    assert agent.session.last("turn/end").data["reason"] == {"kind": "aborted", "reason": "stop it"}
    assert of_type(agent.session.events, "assistant/message") == []
