"""The loop's orders: session log, live ``agent/*`` events and where each seam sits (reference §3, loop.spec)."""

from __future__ import annotations

import dataclasses
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from dsh import events as ev
from dsh.app import load_core
from dsh.events import QueuedInfo, TurnEndReason
from dsh.kernel import App, Context, Next
from dsh.loop._agent import ReactLoopAgent
from dsh.services.agents import Agent, AgentOptions, AgentStatus
from dsh.services.llm import ContentBlock, GenerateRequest, Message, MessageSource, StreamChunk
from dsh.services.sessions import Session, SessionEvent
from dsh.services.tools import ToolDefinition, ToolExecution, ToolResult

USER: MessageSource = {"kind": "user"}
OBJECT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}

# -- helpers ---------------------------------------------------------------------------------------------------


def text(value: str) -> list[ContentBlock]:
    return [{"type": "text", "text": value}]


def make_agent(
    core: Context, steps: list[dict[str, Any]], *, agent_id: str = "a", system_prompt: str | None = None
) -> ReactLoopAgent:
    core.scripted_models.add(agent_id, steps)
    agent: ReactLoopAgent = core.agent_loop.create(
        agent_id, AgentOptions(model=f"scripted:{agent_id}", system_prompt=system_prompt)
    )
    return agent


async def settle(agent: ReactLoopAgent) -> None:
    with anyio.fail_after(5):
        await agent.when_idle()


async def run(agent: ReactLoopAgent, prompt: str) -> None:
    agent.send(text(prompt))
    await settle(agent)


def types(agent: ReactLoopAgent) -> list[str]:
    return [event.type for event in agent.session.events]


def collapse(names: list[str], repeated: tuple[str, ...] = ("assistant/chunk", "agent/stream-chunk")) -> list[str]:
    """Fold runs of a repeated name into one ``name…`` entry."""
    out: list[str] = []
    for name in names:
        folded = f"{name}…" if name in repeated else name
        if folded.endswith("…") and out and out[-1] == folded:
            continue
        out.append(folded)
    return out


def data_of(agent: ReactLoopAgent, event_type: str) -> list[dict[str, Any]]:
    return [event.data for event in agent.session.events if event.type == event_type]


def block_texts(content: list[Any]) -> list[str]:
    return [block["text"] for block in content if block.get("type") == "text"]


def turn_prompts(agent: ReactLoopAgent) -> dict[int, list[str]]:
    """The user/message texts of each turn, by turn number."""
    out: dict[int, list[str]] = {}
    current: int | None = None
    for event in agent.session.events:
        if event.type == "turn/start":
            current = event.data["turn"]
            out[current] = []
        elif event.type == "turn/end":
            current = None
        elif event.type == "user/message":
            assert current is not None, "a user/message outside any turn"
            out[current].extend(block_texts(event.data["content"]))
    return out


def record_requests(core: Context) -> list[GenerateRequest]:
    requests: list[GenerateRequest] = []

    async def on_request(
        agent: Agent, turn: int, step: int, request: GenerateRequest, next: Next[GenerateRequest, GenerateRequest]
    ) -> GenerateRequest:
        requests.append(request)
        return await next()

    core.on(ev.AGENT_REQUEST, on_request)
    return requests


def wrapped(tag: str, kind: str, value: str) -> Message:
    return {
        "role": "user",
        "content": [
            {"type": "text", "text": f'<{tag} source="{kind}">'},
            {"type": "text", "text": value},
            {"type": "text", "text": f"</{tag}>"},
        ],
    }


def register_tool(core: Context, name: str, body: Any) -> None:
    core.tools.register(ToolDefinition(name, f"the {name} tool", OBJECT_SCHEMA, body))


# -- canonical orders ------------------------------------------------------------------------------------------


async def test_simple_text_turn_session_log_order(core: Context) -> None:
    agent = make_agent(core, [{"text": "hello there friend"}])
    await run(agent, "hi")
    assert collapse(types(agent)) == [
        "turn/start",
        "user/message",
        "step/start",
        "assistant/chunk…",
        "assistant/message",
        "usage",
        "step/end",
        "turn/end",
    ]
    assert data_of(agent, "turn/start") == [{"turn": 1, "trigger": {"kind": "message", "source": USER}}]
    assert data_of(agent, "step/start") == [{"turn": 1, "step": 1}]
    assert data_of(agent, "step/end") == [{"turn": 1, "step": 1}]
    assert data_of(agent, "turn/end") == [{"turn": 1, "reason": {"kind": "completed"}}]
    assert [event.seq for event in agent.session.events] == list(range(len(agent.session.events)))
    assert agent.session.derive_messages() == [
        {"role": "user", "content": text("hi")},
        {"role": "assistant", "content": text("hello there friend")},
    ]


async def test_simple_text_turn_live_event_order(core: Context) -> None:
    agent = make_agent(core, [{"text": "one two three"}])
    trace: list[str] = []

    def on_status(a: Agent, status: AgentStatus) -> None:
        trace.append(f"agent/status({status})")

    def named(name: str) -> Any:
        def listener(*args: Any) -> None:
            trace.append(name)

        return listener

    async def on_request(
        a: Agent, turn: int, step: int, request: GenerateRequest, next: Next[GenerateRequest, GenerateRequest]
    ) -> GenerateRequest:
        trace.append("agent/request")
        return await next()

    async def on_step_result(a: Agent, turn: int, step: int, message: Message, next: Next[Message, Message]) -> Message:
        trace.append("agent/step-result")
        return await next()

    async def on_continuation(a: Agent, turn: int, decision: bool, next: Next[bool, bool]) -> bool:
        trace.append("agent/turn-continuation")
        return await next()

    async def on_flush(session: Session) -> None:
        trace.append("session/flush")

    core.on(ev.AGENT_STATUS, on_status)
    for event in (
        ev.AGENT_QUEUED,
        ev.AGENT_TURN_START,
        ev.AGENT_STEP_START,
        ev.AGENT_STREAM_CHUNK,
        ev.AGENT_STEP_END,
        ev.AGENT_TURN_END,
        ev.AGENT_STEERING,
        ev.AGENT_ERROR,
    ):
        core.on(event, named(event.name))
    core.on(ev.AGENT_REQUEST, on_request)
    core.on(ev.AGENT_STEP_RESULT, on_step_result)
    core.on(ev.AGENT_TURN_CONTINUATION, on_continuation)
    core.on(ev.SESSION_FLUSH, on_flush)

    agent.send(text("go"))
    assert trace == ["agent/queued"], "send() emits agent/queued synchronously and nothing else"
    assert agent.status == "idle", "send() returns before the status flips"
    await settle(agent)
    assert collapse(trace) == [
        "agent/queued",
        "agent/status(running)",
        "agent/turn-start",
        "agent/step-start",
        "agent/request",
        "agent/stream-chunk…",
        "agent/step-result",
        "agent/step-end",
        "agent/turn-continuation",
        "session/flush",  # #10 item 2: the turn is durable before turn/end tells the user it succeeded
        "agent/turn-end",
        "session/flush",
        "agent/status(idle)",
    ]


async def test_session_append_comes_before_each_matching_emit(core: Context) -> None:
    agent = make_agent(core, [{"text": "alpha beta gamma"}, {"text": "done"}])
    checks: list[tuple[str, bool]] = []

    def last(a: Agent) -> SessionEvent:
        return a.session.events[-1]

    def on_turn_start(a: Agent, turn: int) -> None:
        opened = a.session.last("turn/start")
        checks.append(("turn-start", opened is not None and opened.data["turn"] == turn))
        checks.append(("turn-start/user", last(a).type == "user/message"))

    def on_step_start(a: Agent, turn: int, step: int) -> None:
        checks.append(("step-start", last(a).type == "step/start" and last(a).data == {"turn": turn, "step": step}))

    def on_chunk(a: Agent, turn: int, step: int, chunk: StreamChunk) -> None:
        event = last(a)
        checks.append(
            ("chunk", event.type == "assistant/chunk" and event.data == {"turn": turn, "step": step, "chunk": chunk})
        )
        if chunk["type"] == "text-delta" and chunk["text"].startswith("alpha"):
            a.steer(text("steer"))

    def on_steering(a: Agent, turn: int, content: list[ContentBlock], source: MessageSource) -> None:
        event = last(a)
        checks.append(
            (
                "steering",
                event.type == "steering/message" and event.data == {"turn": turn, "content": content, "source": source},
            )
        )

    def on_step_end(a: Agent, turn: int, step: int) -> None:
        checks.append(("step-end", last(a).type == "step/end" and last(a).data == {"turn": turn, "step": step}))

    def on_turn_end(a: Agent, turn: int, reason: TurnEndReason) -> None:
        checks.append(("turn-end", last(a).type == "turn/end" and last(a).data == {"turn": turn, "reason": reason}))

    async def on_step_result(a: Agent, turn: int, step: int, message: Message, next: Next[Message, Message]) -> Message:
        logged = [e for e in a.session.events if e.type == "assistant/message" and e.data["step"] == step]
        checks.append(("step-result before assistant/message", logged == []))
        return await next()

    def on_session_event(session: Session, event: SessionEvent) -> None:
        checks.append(("session/event after push", session.events[-1] == event))

    core.on(ev.AGENT_TURN_START, on_turn_start)
    core.on(ev.AGENT_STEP_START, on_step_start)
    core.on(ev.AGENT_STREAM_CHUNK, on_chunk)
    core.on(ev.AGENT_STEERING, on_steering)
    core.on(ev.AGENT_STEP_END, on_step_end)
    core.on(ev.AGENT_TURN_END, on_turn_end)
    core.on(ev.AGENT_STEP_RESULT, on_step_result)
    core.on(ev.SESSION_EVENT, on_session_event)

    await run(agent, "go")
    failed = [name for name, ok in checks if not ok]
    assert failed == []
    seen = {name for name, _ in checks}
    assert seen >= {
        "turn-start",
        "step-start",
        "chunk",
        "steering",
        "step-end",
        "turn-end",
        "step-result before assistant/message",
    }


# -- tools -----------------------------------------------------------------------------------------------------


async def test_tool_round_trip(core: Context) -> None:
    calls: list[ToolExecution] = []

    async def lookup(arguments: Any, execution: ToolExecution) -> str:
        calls.append(execution)
        return f"found {arguments['q']}"

    register_tool(core, "lookup", lookup)
    decisions: list[bool] = []

    async def on_continuation(a: Agent, turn: int, decision: bool, next: Next[bool, bool]) -> bool:
        decisions.append(decision)
        return await next()

    core.on(ev.AGENT_TURN_CONTINUATION, on_continuation)
    requests = record_requests(core)
    agent = make_agent(
        core, [{"tool_calls": [{"name": "lookup", "arguments": {"q": "x"}, "id": "call-A"}]}, {"text": "done"}]
    )
    await run(agent, "find x")

    assert collapse(types(agent)) == [
        "turn/start",
        "user/message",
        "step/start",
        "assistant/chunk…",
        "assistant/message",
        "usage",
        "tool/call",
        "tool/result",
        "step/end",
        "step/start",
        "assistant/chunk…",
        "assistant/message",
        "usage",
        "step/end",
        "turn/end",
    ]
    assert len(requests) == 2
    assert decisions == [True, False]
    assert [(c.call_id, c.name, c.arguments, c.agent) for c in calls] == [("call-A", "lookup", {"q": "x"}, agent)]
    assert data_of(agent, "tool/call") == [
        {"turn": 1, "step": 1, "call_id": "call-A", "name": "lookup", "arguments": '{"q": "x"}'}
    ]
    assert data_of(agent, "tool/result") == [
        {"turn": 1, "step": 1, "call_id": "call-A", "content": text("found x"), "is_error": False}
    ]
    second = requests[1].messages
    assert second[-1] == {
        "role": "user",
        "content": [{"type": "tool-result", "tool_call_id": "call-A", "content": text("found x"), "is_error": False}],
    }
    assert second[1]["role"] == "assistant"
    assert [b for b in second[1]["content"] if b["type"] == "tool-call"] == [
        {"type": "tool-call", "id": "call-A", "name": "lookup", "arguments": '{"q": "x"}'}
    ]
    assert data_of(agent, "turn/end") == [{"turn": 1, "reason": {"kind": "completed"}}]


async def test_tool_result_uses_the_model_call_id_whatever_the_listener_returns(core: Context) -> None:
    async def impostor(execution: ToolExecution, next: Next[ToolExecution, ToolResult]) -> ToolResult:
        return ToolResult(call_id="not-the-model-id", content=text("vetoed"))

    core.on(ev.TOOLS_EXECUTE, impostor)
    requests = record_requests(core)
    agent = make_agent(core, [{"tool_calls": [{"name": "anything", "id": "call-M"}]}, {"text": "ok"}])
    await run(agent, "go")
    results = data_of(agent, "tool/result")
    assert [(r["call_id"], r["content"], r["is_error"]) for r in results] == [("call-M", text("vetoed"), False)]
    block = requests[1].messages[-1]["content"][0]
    assert block["type"] == "tool-result" and block["tool_call_id"] == "call-M"


async def test_tools_run_sequentially_in_model_order(core: Context) -> None:
    trace: list[str] = []

    async def work(arguments: Any, execution: ToolExecution) -> str:
        trace.append(f"start {execution.call_id}")
        for _ in range(5):  # give a concurrent scheduler every chance to interleave
            await anyio.lowlevel.checkpoint()
        trace.append(f"end {execution.call_id}")
        return execution.call_id

    register_tool(core, "work", work)
    calls = [{"name": "work", "arguments": {"n": n}, "id": f"c{n}"} for n in (3, 1, 2)]
    agent = make_agent(core, [{"tool_calls": calls}, {"text": "done"}])
    await run(agent, "go")
    assert trace == ["start c3", "end c3", "start c1", "end c1", "start c2", "end c2"]
    tool_events = [(e.type, e.data["call_id"]) for e in agent.session.events if e.type.startswith("tool/")]
    assert tool_events == [
        ("tool/call", "c3"),
        ("tool/result", "c3"),
        ("tool/call", "c1"),
        ("tool/result", "c1"),
        ("tool/call", "c2"),
        ("tool/result", "c2"),
    ]


# -- the request -----------------------------------------------------------------------------------------------


async def test_system_is_sections_then_the_agent_prompt_joined_by_a_blank_line(core: Context) -> None:
    core.system_prompt.section("late", 20, "Second section")
    core.system_prompt.section("early", 10, lambda: "First section")
    core.system_prompt.section("blank", 15, "")
    requests = record_requests(core)
    agent = make_agent(core, [{"text": "ok"}], system_prompt="Agent prompt")
    await run(agent, "go")
    assert [r.system for r in requests] == ["First section\n\nSecond section\n\nAgent prompt"]


async def test_system_and_tools_are_omitted_when_empty() -> None:
    async with App() as app:
        load_core(app.ctx, builtin_tools=False, context=False)  # no tool and no prompt section at all
        requests = record_requests(app.ctx)
        agent = make_agent(app.ctx, [{"text": "ok"}])
        await run(agent, "go")
        assert [(r.system, r.tools) for r in requests] == [(None, None)]


async def test_agent_prompt_alone_is_the_system(core: Context) -> None:
    requests = record_requests(core)
    agent = make_agent(core, [{"text": "ok"}], system_prompt="Only me")
    await run(agent, "go")
    assert [r.system for r in requests] == ["Only me"]


async def test_tools_list_is_passed_through_in_the_request() -> None:
    async def noop(arguments: Any, execution: ToolExecution) -> str:
        return ""

    async with App() as app:
        core = app.ctx
        load_core(core, builtin_tools=False)  # only the tool registered here
        schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
        core.tools.register(ToolDefinition("read", "Read a file", schema, noop, strict=True))
        requests = record_requests(core)
        agent = make_agent(core, [{"text": "ok"}])
        await run(agent, "go")
        assert [r.tools for r in requests] == [
            [{"name": "read", "description": "Read a file", "parameters": schema, "strict": True}]
        ]
        assert requests[0].model == "scripted:a"
        assert requests[0].messages == [{"role": "user", "content": text("go")}]


async def test_raw_chunks_are_logged_and_mirrored_on_stream_chunk(core: Context) -> None:
    mirrored: list[tuple[int, int, StreamChunk]] = []

    def on_chunk(a: Agent, turn: int, step: int, chunk: StreamChunk) -> None:
        mirrored.append((turn, step, chunk))

    core.on(ev.AGENT_STREAM_CHUNK, on_chunk)
    agent = make_agent(
        core, [{"reasoning": "think", "text": "hello world", "usage": {"input_tokens": 3, "output_tokens": 4}}]
    )
    await run(agent, "go")
    expected: list[StreamChunk] = [
        {"type": "reasoning-delta", "text": "think"},
        {"type": "text-delta", "text": "hello "},
        {"type": "text-delta", "text": "world"},
        {"type": "usage", "usage": {"input_tokens": 3, "output_tokens": 4}},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]
    assert data_of(agent, "assistant/chunk") == [{"turn": 1, "step": 1, "chunk": c} for c in expected]
    assert mirrored == [(1, 1, c) for c in expected]
    assert data_of(agent, "assistant/message") == [
        {
            "turn": 1,
            "step": 1,
            "content": [{"type": "reasoning", "text": "think"}, {"type": "text", "text": "hello world"}],
        }
    ]
    assert data_of(agent, "usage") == [{"turn": 1, "step": 1, "usage": {"input_tokens": 3, "output_tokens": 4}}]


# -- steering --------------------------------------------------------------------------------------------------


async def test_steering_during_a_step_continues_the_turn(core: Context) -> None:
    queued: list[QueuedInfo] = []
    steered: list[tuple[int, list[ContentBlock], MessageSource]] = []
    decisions: list[bool] = []

    def on_chunk(a: Agent, turn: int, step: int, chunk: StreamChunk) -> None:
        if step == 1 and chunk["type"] == "text-delta" and chunk["text"].startswith("first"):
            a.steer(text("also this"))

    def on_queued(a: Agent, content: list[ContentBlock], info: QueuedInfo) -> None:
        queued.append(info)

    def on_steering(a: Agent, turn: int, content: list[ContentBlock], source: MessageSource) -> None:
        steered.append((turn, content, source))

    async def on_continuation(a: Agent, turn: int, decision: bool, next: Next[bool, bool]) -> bool:
        decisions.append(decision)
        return await next()

    core.on(ev.AGENT_STREAM_CHUNK, on_chunk)
    core.on(ev.AGENT_QUEUED, on_queued)
    core.on(ev.AGENT_STEERING, on_steering)
    core.on(ev.AGENT_TURN_CONTINUATION, on_continuation)
    requests = record_requests(core)
    agent = make_agent(core, [{"text": "first answer"}, {"text": "second answer"}])
    await run(agent, "go")

    assert collapse(types(agent)) == [
        "turn/start",
        "user/message",
        "step/start",
        "assistant/chunk…",
        "assistant/message",
        "usage",
        "steering/message",
        "step/end",
        "step/start",
        "assistant/chunk…",
        "assistant/message",
        "usage",
        "step/end",
        "turn/end",
    ]
    assert decisions == [True, False]
    assert queued == [{"source": USER, "steering": False}, {"source": USER, "steering": True}]
    assert steered == [(1, text("also this"), USER)]
    assert data_of(agent, "steering/message") == [{"turn": 1, "content": text("also this"), "source": USER}]
    assert len(requests) == 2
    assert requests[1].messages[-1] == wrapped("steering", "user", "also this")
    assert data_of(agent, "turn/end") == [{"turn": 1, "reason": {"kind": "completed"}}]


async def test_steering_during_tools_lands_after_the_last_tool_result_before_step_end(core: Context) -> None:
    agent_ref: list[ReactLoopAgent] = []

    async def first(arguments: Any, execution: ToolExecution) -> str:
        agent_ref[0].steer(text("mid-tools"))
        return "one"

    async def second(arguments: Any, execution: ToolExecution) -> str:
        return "two"

    register_tool(core, "first", first)
    register_tool(core, "second", second)
    agent = make_agent(
        core,
        [
            {"tool_calls": [{"name": "first", "id": "t1"}, {"name": "second", "id": "t2"}]},
            {"text": "done"},
        ],
    )
    agent_ref.append(agent)
    await run(agent, "go")
    step_one = [e.type for e in agent.session.events if e.data.get("step") == 1 or e.type == "steering/message"]
    assert step_one[-4:] == ["tool/call", "tool/result", "steering/message", "step/end"]
    names = types(agent)
    assert names.index("steering/message") == names.index("step/end") - 1
    assert names.count("step/start") == 2
    assert agent.session.derive_messages()[-2] == wrapped("steering", "user", "mid-tools")


async def test_steering_from_a_turn_start_listener_is_drained_before_the_first_step(core: Context) -> None:
    def on_turn_start(a: Agent, turn: int) -> None:
        a.steer(text("before step one"))

    core.on(ev.AGENT_TURN_START, on_turn_start)
    requests = record_requests(core)
    agent = make_agent(core, [{"text": "ok"}])
    await run(agent, "go")
    assert types(agent)[:4] == ["turn/start", "user/message", "steering/message", "step/start"]
    assert requests[0].messages[-1] == wrapped("steering", "user", "before step one")
    assert types(agent).count("step/start") == 1, "drained before the step, so it does not force another"


@pytest.mark.parametrize("where", ["step-end", "continuation"])
async def test_steering_from_a_late_listener_forces_another_step(core: Context, where: str) -> None:
    """Steering raised after the step's last drain overrides a stop and opens the next step."""
    raised: list[int] = []

    def on_step_end(a: Agent, turn: int, step: int) -> None:
        if not raised:
            raised.append(step)
            a.steer(text("keep going"))

    async def on_continuation(a: Agent, turn: int, decision: bool, next: Next[bool, bool]) -> bool:
        if not raised:
            raised.append(1)
            a.steer(text("keep going"))
        return False  # the waterfall says stop; pending steering wins

    if where == "step-end":
        core.on(ev.AGENT_STEP_END, on_step_end)
    core.on(ev.AGENT_TURN_CONTINUATION, on_continuation if where == "continuation" else _pass_through)
    requests = record_requests(core)
    agent = make_agent(core, [{"text": "first"}, {"text": "second"}])
    await run(agent, "go")
    names = types(agent)
    assert names.count("step/start") == 2
    second_step = names.index("step/start", names.index("step/end"))
    assert names[second_step - 1] == "steering/message", "drained at the top of the next step"
    assert names.index("step/end") < second_step - 1
    assert len(requests) == 2
    assert requests[1].messages[-1] == wrapped("steering", "user", "keep going")
    assert data_of(agent, "turn/end") == [{"turn": 1, "reason": {"kind": "completed"}}]


async def _pass_through(a: Agent, turn: int, decision: bool, next: Next[bool, bool]) -> bool:
    return await next()


async def test_steer_while_idle_behaves_like_send(core: Context) -> None:
    queued: list[QueuedInfo] = []

    def on_queued(a: Agent, content: list[ContentBlock], info: QueuedInfo) -> None:
        queued.append(info)

    core.on(ev.AGENT_QUEUED, on_queued)
    agent = make_agent(core, [{"text": "ok"}])
    agent.steer(text("idle steer"))
    assert queued == [{"source": USER, "steering": False}]
    await settle(agent)
    assert "steering/message" not in types(agent)
    assert turn_prompts(agent) == {1: ["idle steer"]}
    assert data_of(agent, "turn/start") == [{"turn": 1, "trigger": {"kind": "message", "source": USER}}]


async def test_leftover_steering_from_a_turn_end_listener_becomes_the_next_prompt(core: Context) -> None:
    queued: list[QueuedInfo] = []

    def on_turn_end(a: Agent, turn: int, reason: TurnEndReason) -> None:
        if turn == 1:
            a.steer(text("follow-up"))

    def on_queued(a: Agent, content: list[ContentBlock], info: QueuedInfo) -> None:
        queued.append(info)

    core.on(ev.AGENT_TURN_END, on_turn_end)
    core.on(ev.AGENT_QUEUED, on_queued)
    agent = make_agent(core, [{"text": "one"}, {"text": "two"}])
    await run(agent, "first")
    assert turn_prompts(agent) == {1: ["first"], 2: ["follow-up"]}
    assert "steering/message" not in types(agent)
    assert [e["reason"] for e in data_of(agent, "turn/end")] == [{"kind": "completed"}] * 2
    assert queued == [{"source": USER, "steering": False}, {"source": USER, "steering": True}], (
        "the re-queued leftover emits no second agent/queued"
    )


# -- inject ----------------------------------------------------------------------------------------------------


async def test_idle_inject_wraps_a_one_shot_turn_visible_to_the_next_request(core: Context) -> None:
    emitted: list[str] = []
    for event in (ev.AGENT_TURN_START, ev.AGENT_TURN_END, ev.AGENT_STATUS):

        def listener(*args: Any, _name: str = event.name) -> None:
            emitted.append(_name)

        core.on(event, listener)
    requests = record_requests(core)
    agent = make_agent(core, [{"text": "ok"}])
    source: MessageSource = {"kind": "plugin", "plugin": "memory"}

    agent.inject(text("background"), source)
    # Synchronous: the one-shot turn is already in the log when inject() returns, with no agent/* emits.
    assert types(agent) == ["turn/start", "context/message", "turn/end"]
    assert data_of(agent, "turn/start") == [{"turn": 1, "trigger": {"kind": "injection", "source": source}}]
    assert data_of(agent, "context/message") == [{"content": text("background"), "source": source}]
    assert data_of(agent, "turn/end") == [{"turn": 1, "reason": {"kind": "completed"}}]
    assert emitted == []
    assert agent.status == "idle"

    agent.inject(text("user context"))
    await run(agent, "question")
    assert [d["turn"] for d in data_of(agent, "turn/start")] == [1, 2, 3]
    assert data_of(agent, "turn/start")[2]["trigger"] == {"kind": "message", "source": USER}
    assert requests[0].messages == [
        wrapped("context", "plugin", "background"),
        wrapped("context", "user", "user context"),
        {"role": "user", "content": text("question")},
    ]


async def test_inject_during_a_running_turn_joins_the_open_turn(core: Context) -> None:
    def on_step_start(a: Agent, turn: int, step: int) -> None:
        a.inject(text("fresh context"))

    core.on(ev.AGENT_STEP_START, on_step_start)
    requests = record_requests(core)
    agent = make_agent(core, [{"text": "ok"}])
    await run(agent, "go")
    assert collapse(types(agent)) == [
        "turn/start",
        "user/message",
        "step/start",
        "context/message",
        "assistant/chunk…",
        "assistant/message",
        "usage",
        "step/end",
        "turn/end",
    ]
    assert requests[0].messages[-1] == wrapped("context", "user", "fresh context")


# -- the seams -------------------------------------------------------------------------------------------------


async def test_turn_continuation_can_force_another_step(core: Context) -> None:
    decisions: list[bool] = []

    async def on_continuation(a: Agent, turn: int, decision: bool, next: Next[bool, bool]) -> bool:
        decisions.append(decision)
        if len(decisions) == 1:
            return True
        return await next()

    core.on(ev.AGENT_TURN_CONTINUATION, on_continuation)
    agent = make_agent(core, [{"text": "first"}, {"text": "second"}])
    await run(agent, "go")
    assert decisions == [False, False]
    assert data_of(agent, "step/start") == [{"turn": 1, "step": 1}, {"turn": 1, "step": 2}]
    assert [block_texts(d["content"]) for d in data_of(agent, "assistant/message")] == [["first"], ["second"]]
    assert core.scripted_models.remaining("a") == 0


async def test_turn_continuation_can_stop_despite_tool_calls(core: Context) -> None:
    decisions: list[bool] = []
    ran: list[str] = []

    async def on_continuation(a: Agent, turn: int, decision: bool, next: Next[bool, bool]) -> bool:
        decisions.append(decision)
        return False

    async def tool(arguments: Any, execution: ToolExecution) -> str:
        ran.append(execution.call_id)
        return "ran"

    register_tool(core, "tool", tool)
    core.on(ev.AGENT_TURN_CONTINUATION, on_continuation)
    agent = make_agent(core, [{"tool_calls": [{"name": "tool", "id": "t1"}]}, {"text": "never"}])
    await run(agent, "go")
    assert decisions == [True]
    assert ran == ["t1"]
    assert types(agent).count("step/start") == 1
    assert data_of(agent, "turn/end") == [{"turn": 1, "reason": {"kind": "completed"}}]
    assert core.scripted_models.remaining("a") == 1


async def test_agent_request_can_rewrite_the_request(core: Context) -> None:
    async def switch(
        a: Agent, turn: int, step: int, request: GenerateRequest, next: Next[GenerateRequest, GenerateRequest]
    ) -> GenerateRequest:
        return await next(dataclasses.replace(request, model="scripted:right", system="rewritten system"))

    seen: list[GenerateRequest] = []

    async def observe(
        a: Agent, turn: int, step: int, request: GenerateRequest, next: Next[GenerateRequest, GenerateRequest]
    ) -> GenerateRequest:
        seen.append(request)
        return await next()

    core.on(ev.AGENT_REQUEST, switch)
    core.on(ev.AGENT_REQUEST, observe)
    core.scripted_models.add("right", [{"text": "from the right model"}])
    core.scripted_models.add("wrong", [{"text": "from the wrong model"}])
    agent: ReactLoopAgent = core.agent_loop.create("a", AgentOptions(model="scripted:wrong"))
    await run(agent, "go")
    assert [(r.model, r.system) for r in seen] == [("scripted:right", "rewritten system")]
    assert [block_texts(d["content"]) for d in data_of(agent, "assistant/message")] == [["from the right model"]]
    assert core.scripted_models.remaining("wrong") == 1
    assert data_of(agent, "turn/end") == [{"turn": 1, "reason": {"kind": "completed"}}]


async def test_step_result_rewrite_is_what_the_log_history_and_tools_see(core: Context) -> None:
    ran: list[tuple[str, str, Any]] = []

    async def tool(arguments: Any, execution: ToolExecution) -> str:
        ran.append((execution.name, execution.call_id, arguments))
        return "ok"

    register_tool(core, "bad_tool", tool)
    register_tool(core, "good_tool", tool)
    rewritten: list[ContentBlock] = [
        {"type": "text", "text": "rewritten"},
        {"type": "tool-call", "id": "call-good", "name": "good_tool", "arguments": '{"v": 1}'},
    ]

    async def rewrite(a: Agent, turn: int, step: int, message: Message, next: Next[Message, Message]) -> Message:
        if step == 1:
            return await next({"role": "assistant", "content": rewritten})
        return await next()

    core.on(ev.AGENT_STEP_RESULT, rewrite)
    requests = record_requests(core)
    agent = make_agent(
        core, [{"text": "original", "tool_calls": [{"name": "bad_tool", "id": "call-bad"}]}, {"text": "final"}]
    )
    await run(agent, "go")
    assert ran == [("good_tool", "call-good", {"v": 1})]
    assert data_of(agent, "assistant/message")[0]["content"] == rewritten
    assert [(d["call_id"], d["name"]) for d in data_of(agent, "tool/call")] == [("call-good", "good_tool")]
    assert [d["call_id"] for d in data_of(agent, "tool/result")] == ["call-good"]
    assert agent.session.derive_messages()[1] == {"role": "assistant", "content": rewritten}
    assert requests[1].messages[1] == {"role": "assistant", "content": rewritten}


# -- batching and chaining -------------------------------------------------------------------------------------


async def test_a_prompt_queued_during_a_turn_chains_into_the_next_turn(core: Context) -> None:
    statuses: list[str] = []

    def on_turn_start(a: Agent, turn: int) -> None:
        if turn == 1:
            a.send(text("B"))

    def on_status(a: Agent, status: AgentStatus) -> None:
        statuses.append(status)

    core.on(ev.AGENT_TURN_START, on_turn_start)
    core.on(ev.AGENT_STATUS, on_status)
    agent = make_agent(core, [{"text": "one"}, {"text": "two"}])
    await run(agent, "A")
    assert [d["turn"] for d in data_of(agent, "turn/start")] == [1, 2]
    assert turn_prompts(agent) == {1: ["A"], 2: ["B"]}
    assert [d["reason"] for d in data_of(agent, "turn/end")] == [{"kind": "completed"}] * 2
    assert statuses == ["running", "idle"], "the agent stays running into the chained turn"


@pytest.mark.parametrize("driver", ["fresh", "parked"])
async def test_a_synchronous_burst_of_sends_batches_into_one_turn(core: Context, driver: str) -> None:
    agent = make_agent(core, [{"text": "one answer"}, {"text": "unused"}])
    if driver == "parked":  # the driver already sleeps in wait_for_queued
        with anyio.fail_after(5):
            await anyio.wait_all_tasks_blocked()
    requests = record_requests(core)
    first: MessageSource = {"kind": "plugin", "plugin": "scheduler"}
    agent.send(text("m1"), first)
    agent.send(text("m2"))
    agent.send(text("m3"))
    await settle(agent)
    assert types(agent).count("turn/start") == 1
    assert data_of(agent, "turn/start") == [{"turn": 1, "trigger": {"kind": "message", "source": first}}]
    assert data_of(agent, "user/message") == [
        {"content": text("m1"), "source": first},
        {"content": text("m2"), "source": USER},
        {"content": text("m3"), "source": USER},
    ]
    assert types(agent)[:4] == ["turn/start", "user/message", "user/message", "user/message"]
    assert len(requests) == 1
    assert [m["content"] for m in requests[0].messages] == [text("m1"), text("m2"), text("m3")]
    assert core.scripted_models.remaining("a") == 1


# -- the durability checkpoint ---------------------------------------------------------------------------------


async def test_session_flush_is_awaited_at_turn_end_while_still_running(core: Context) -> None:
    observed: list[tuple[str, str, str | None]] = []
    trace: list[str] = []

    async def on_flush(session: Session) -> None:
        agent = core.agents.get("a")
        assert agent is not None
        last = session.events[-1]
        observed.append(("start", agent.status, last.type))
        for _ in range(10):  # a slow backend: the loop must wait for it
            await anyio.lowlevel.checkpoint()
        observed.append(("end", agent.status, None))
        trace.append("flush finished")

    def on_status(a: Agent, status: AgentStatus) -> None:
        trace.append(status)

    core.on(ev.SESSION_FLUSH, on_flush)
    core.on(ev.AGENT_STATUS, on_status)
    agent = make_agent(core, [{"text": "ok"}])
    await run(agent, "go")
    # #10 item 2: a successful turn is made durable before its turn/end (which answers the user), then the
    # turn/end itself (this expectation changed: one flush after turn/end before)
    assert observed == [
        ("start", "running", "step/end"),
        ("end", "running", None),
        ("start", "running", "turn/end"),
        ("end", "running", None),
    ]
    assert trace == ["running", "flush finished", "flush finished", "idle"]
