"""Corner cases of the loop: the original's coverage-edges and review-fixes specs (reference §9).

Tool argument parsing, error normalisation, disposal while streaming, tool error codes, abort from inside a
tool, steering raised by late listeners, resolved sources, append-before-emit, and a sweep over every boundary
a plugin can throw at (one ``error`` event, one ``turn/end``, balanced steps, nothing after ``turn/end``).
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any, cast

import anyio
import pytest

from dsh import events as ev
from dsh.errors import DshError
from dsh.kernel import App, Context
from dsh.loop._agent import ReactLoopAgent
from dsh.services.agents import AgentOptions
from dsh.services.llm import ContentBlock, GenerateRequest, Message, MessageSource, StreamChunk
from dsh.services.sessions import Session, SessionEvent
from dsh.services.tools import ToolDefinition, ToolExecution

# -- helpers --------------------------------------------------------------------------------------------------


def text(value: str) -> list[ContentBlock]:
    return [{"type": "text", "text": value}]


def types_of(agent: ReactLoopAgent) -> list[str]:
    return [event.type for event in agent.session.events]


def of_type(agent: ReactLoopAgent, kind: str) -> list[SessionEvent]:
    return [event for event in agent.session.events if event.type == kind]


def reasons(agent: ReactLoopAgent) -> list[dict[str, Any]]:
    return [event.data["reason"] for event in of_type(agent, "turn/end")]


def steering_wrapped(value: str, kind: str = "user") -> Message:
    return {
        "role": "user",
        "content": [
            {"type": "text", "text": f'<steering source="{kind}">'},
            {"type": "text", "text": value},
            {"type": "text", "text": "</steering>"},
        ],
    }


def assert_enclosed(session: Session) -> None:
    """Every event lives inside a turn, steps are balanced inside their turn, the log ends with ``turn/end``."""
    open_turn: int | None = None
    open_step: int | None = None
    for event in session.events:
        if event.type == "turn/start":
            assert open_turn is None, f"turn/start #{event.seq} inside turn {open_turn}"
            open_turn = event.data["turn"]
        elif event.type == "turn/end":
            assert open_turn == event.data["turn"], f"unbalanced turn/end #{event.seq}"
            assert open_step is None, f"turn/end #{event.seq} while step {open_step} is open"
            open_turn = None
        else:
            assert open_turn is not None, f"{event.type} #{event.seq} outside any turn"
            if event.type == "step/start":
                assert open_step is None
                open_step = event.data["step"]
            elif event.type == "step/end":
                assert open_step == event.data["step"]
                open_step = None
    assert open_turn is None, "the last turn was never closed"


async def prompt(agent: ReactLoopAgent, value: str) -> None:
    agent.send(text(value))
    with anyio.fail_after(5):
        await agent.when_idle()


def scripted_agent(ctx: Context, steps: list[dict[str, Any]], agent_id: str = "a") -> ReactLoopAgent:
    ctx.scripted_models.add(agent_id, steps)
    agent: ReactLoopAgent = ctx.agent_loop.create(agent_id, AgentOptions(model=f"scripted:{agent_id}"))
    return agent


class ToolSpy:
    """A tool that records the arguments it was called with."""

    def __init__(self, ctx: Context, name: str = "t", output: str = "tool output") -> None:
        self.calls: list[Any] = []
        self.output = output
        ctx.tools.register(ToolDefinition(name, "a test tool", {"type": "object"}, self.run))

    async def run(self, arguments: Any, execution: ToolExecution) -> str:
        self.calls.append(arguments)
        return self.output


def errors_of(ctx: Context) -> list[tuple[int, int, BaseException]]:
    calls: list[tuple[int, int, BaseException]] = []
    ctx.on(ev.AGENT_ERROR, lambda agent, turn, step, error: calls.append((turn, step, error)))
    return calls


# -- tool arguments -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        ("not json {", "not json {"),
        ("", {}),
        ("   ", {}),
        ('{"path": "a.txt", "n": [1, 2]}', {"path": "a.txt", "n": [1, 2]}),
        ("[1, 2]", [1, 2]),
    ],
    ids=["invalid-json", "empty", "blank", "object", "array"],
)
async def test_tool_arguments_are_parsed_leniently(core: Context, raw: str, parsed: Any) -> None:
    tool = ToolSpy(core)
    agent = scripted_agent(core, [{"tool_calls": [{"name": "t", "id": "c1", "arguments": raw}]}, {"text": "ok"}])
    await prompt(agent, "go")
    assert tool.calls == [parsed]
    calls = of_type(agent, "tool/call")
    assert [(c.data["call_id"], c.data["name"], c.data["arguments"]) for c in calls] == [("c1", "t", raw)]
    assert reasons(agent) == [{"kind": "completed"}]


# -- error normalisation ------------------------------------------------------------------------------------


class NoMessage(Exception):
    pass


class OddAttributes(Exception):
    message = 42  # not a string: ignored
    code = 500  # not a string: dropped


class ThirdPartyError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.code = "E_THIRD_PARTY"


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (NoMessage(), {"kind": "error", "message": "NoMessage"}),
        (OddAttributes("odd one"), {"kind": "error", "message": "odd one"}),
        (ThirdPartyError("vendor failed"), {"kind": "error", "message": "vendor failed", "code": "E_THIRD_PARTY"}),
        (DshError("ours failed", "E_OURS"), {"kind": "error", "message": "ours failed", "code": "E_OURS"}),
    ],
    ids=["empty-message", "non-string-attributes", "third-party-code", "dsh-error-code"],
)
async def test_errors_are_normalised_and_keep_string_codes(
    core: Context, error: Exception, expected: dict[str, Any]
) -> None:
    errors = errors_of(core)

    async def request(agent: object, turn: int, step: int, req: GenerateRequest, next: Any) -> Any:
        raise error

    core.on(ev.AGENT_REQUEST, request)
    agent: ReactLoopAgent = core.agent_loop.create("a", AgentOptions(model="echo"))
    await prompt(agent, "hello")
    assert reasons(agent) == [expected]
    logged = [e.data for e in of_type(agent, "error")]
    assert logged == [{"turn": 1, "step": 1, **{k: v for k, v in expected.items() if k != "kind"}}]
    assert [(turn, step, raised) for turn, step, raised in errors] == [(1, 1, error)]


class NotAnException(BaseException):
    """Raised by a misbehaving plugin: derived from BaseException but not from Exception."""


async def test_non_exception_throw_is_normalised_and_the_loop_survives() -> None:
    from dsh.app import load_core

    async def scenario() -> None:
        async with App() as application:
            ctx = application.ctx
            load_core(ctx)
            fired = False

            async def request(agent: object, turn: int, step: int, req: GenerateRequest, next: Any) -> Any:
                nonlocal fired
                if not fired:
                    fired = True
                    raise NotAnException("not an exception")
                return await next()

            ctx.on(ev.AGENT_REQUEST, request)
            agent: ReactLoopAgent = ctx.agent_loop.create("a", AgentOptions(model="echo"))
            await prompt(agent, "hello")
            assert reasons(agent)[0]["kind"] == "error"
            assert reasons(agent)[0]["message"] == "not an exception"
            assert len(of_type(agent, "error")) == 1
            await prompt(agent, "again")
            assert reasons(agent)[1] == {"kind": "completed"}

    crash: str | None = None
    try:
        with anyio.fail_after(5):
            await scenario()
    except BaseExceptionGroup as group:  # the App's task group died with the plugin's exception
        crash = repr(group.exceptions)
    finally:
        gc.collect()  # finalise the dead App's coroutines here, not at a random later point
    assert crash is None, f"the application crashed: {crash}"


# -- disposal while streaming -------------------------------------------------------------------------------


async def test_dispose_during_streaming_ends_the_turn_disposed(core: Context) -> None:
    errors = errors_of(core)
    statuses: list[str] = []
    core.on(ev.AGENT_STATUS, lambda agent, status: statuses.append(status))
    core.scripted_models.add("slow", [{"text": "one two three four", "delay": 5}])
    handle = await core.agents.create(agent_id="a", session_id="s", agent_options=AgentOptions(model="scripted:slow"))
    agent = cast(ReactLoopAgent, handle.agent)
    streaming = anyio.Event()
    core.on(ev.AGENT_STREAM_CHUNK, lambda agent, turn, step, chunk: streaming.set())
    agent.send(text("hello"))
    with anyio.fail_after(5):
        await streaming.wait()
        await handle.dispose()
    assert reasons(agent) == [{"kind": "disposed"}]
    assert len(of_type(agent, "assistant/chunk")) == 1  # nothing streamed after the disposal
    assert "assistant/message" not in types_of(agent)
    assert "error" not in types_of(agent)
    assert errors == []
    assert statuses == ["running", "disposed"]
    assert_enclosed(agent.session)


# -- tools --------------------------------------------------------------------------------------------------


async def test_a_tool_dsh_error_code_is_forwarded_onto_tool_result(core: Context) -> None:
    async def denied(arguments: Any, execution: ToolExecution) -> str:
        raise DshError("permission denied", "E_DENIED")

    core.tools.register(ToolDefinition("t", "a tool", {"type": "object"}, denied))
    agent = scripted_agent(core, [{"tool_calls": [{"name": "t", "id": "c1"}]}, {"text": "ok"}])
    await prompt(agent, "go")
    (result,) = of_type(agent, "tool/result")
    assert result.data["is_error"] is True
    assert result.data["error"] == {"name": "DshError", "code": "E_DENIED"}
    assert result.data["content"] == text("Error: permission denied")
    assert reasons(agent) == [{"kind": "completed"}]


async def test_an_uncoded_tool_error_has_no_error_key(core: Context) -> None:
    async def broken(arguments: Any, execution: ToolExecution) -> str:
        raise ValueError("bad input")

    core.tools.register(ToolDefinition("t", "a tool", {"type": "object"}, broken))
    agent = scripted_agent(core, [{"tool_calls": [{"name": "t"}]}, {"text": "ok"}])
    await prompt(agent, "go")
    (result,) = of_type(agent, "tool/result")
    assert result.data["is_error"] is True
    assert "error" not in result.data


@pytest.mark.parametrize("position", ["first of two", "last"])
async def test_abort_inside_a_tool_stops_remaining_tools_and_the_next_step(core: Context, position: str) -> None:
    second = ToolSpy(core, "second")
    aborter_ran: list[str] = []

    async def aborting(arguments: Any, execution: ToolExecution) -> str:
        aborter_ran.append(execution.call_id)
        assert execution.agent is not None
        execution.agent.abort()
        return "done, but aborting"

    core.tools.register(ToolDefinition("aborter", "aborts", {"type": "object"}, aborting))
    calls = [{"name": "aborter", "id": "c1"}, {"name": "second", "id": "c2"}]
    if position == "last":
        calls.reverse()
    agent = scripted_agent(core, [{"tool_calls": calls}, {"text": "kept for the next prompt"}])
    await prompt(agent, "go")
    assert aborter_ran == ["c1"]
    expected_calls = ["c1"] if position == "first of two" else ["c2", "c1"]
    assert second.calls == ([] if position == "first of two" else [{}])
    assert [c.data["call_id"] for c in of_type(agent, "tool/call")] == expected_calls
    assert [r.data["call_id"] for r in of_type(agent, "tool/result")] == expected_calls
    assert len(of_type(agent, "step/start")) == 1
    assert core.scripted_models.remaining("a") == 1
    assert reasons(agent) == [{"kind": "aborted", "reason": "aborted"}]
    assert "error" not in types_of(agent)
    assert_enclosed(agent.session)
    await prompt(agent, "again")  # the abort governed only that step
    assert reasons(agent)[-1] == {"kind": "completed"}


# -- steering raised by late listeners ----------------------------------------------------------------------


def _record_requests(ctx: Context) -> list[GenerateRequest]:
    requests: list[GenerateRequest] = []

    async def record(agent: object, turn: int, step: int, request: GenerateRequest, next: Any) -> Any:
        requests.append(request)
        return await next()

    ctx.on(ev.AGENT_REQUEST, record)
    return requests


async def test_steer_from_a_step_end_listener_reaches_the_next_request(core: Context) -> None:
    requests = _record_requests(core)
    agent = scripted_agent(core, [{"text": "first"}, {"text": "second"}])
    fired = False

    def step_end(target: ReactLoopAgent, turn: int, step: int) -> None:
        nonlocal fired
        if not fired:
            fired = True
            target.steer(text("keep going"))

    core.on(ev.AGENT_STEP_END, step_end)
    await prompt(agent, "go")
    assert len(requests) == 2
    assert requests[1].messages[-1] == steering_wrapped("keep going")
    log = [e.type for e in agent.session.events if e.type != "assistant/chunk"]
    assert log[log.index("step/end") : log.index("step/end") + 3] == ["step/end", "steering/message", "step/start"]
    assert reasons(agent) == [{"kind": "completed"}]
    assert len(of_type(agent, "turn/start")) == 1


async def test_steer_from_a_continuation_listener_overrides_a_stop(core: Context) -> None:
    requests = _record_requests(core)
    agent = scripted_agent(core, [{"text": "first"}, {"text": "second"}])
    fired = False

    async def continuation(target: ReactLoopAgent, turn: int, default: bool, next: Any) -> bool:
        nonlocal fired
        if not fired:
            fired = True
            target.steer(text("the goal is not met"))
            return False  # a stop, overridden by the pending steering
        result: bool = await next()
        return result

    core.on(ev.AGENT_TURN_CONTINUATION, continuation)
    await prompt(agent, "go")
    assert len(requests) == 2
    assert requests[1].messages[-1] == steering_wrapped("the goal is not met")
    assert reasons(agent) == [{"kind": "completed"}]


async def test_steer_from_a_turn_end_listener_becomes_the_next_turn(core: Context) -> None:
    queued: list[tuple[list[ContentBlock], dict[str, Any]]] = []
    core.on(ev.AGENT_QUEUED, lambda agent, content, info: queued.append((content, dict(info))))
    agent: ReactLoopAgent = core.agent_loop.create("a", AgentOptions(model="echo"))
    fired = False

    def turn_end(target: ReactLoopAgent, turn: int, reason: object) -> None:
        nonlocal fired
        if not fired:
            fired = True
            target.steer(text("follow up"))

    core.on(ev.AGENT_TURN_END, turn_end)
    await prompt(agent, "first")
    assert [e.data["turn"] for e in of_type(agent, "turn/start")] == [1, 2]
    assert [e.data["content"] for e in of_type(agent, "user/message")] == [text("first"), text("follow up")]
    assert "steering/message" not in types_of(agent)
    assert reasons(agent) == [{"kind": "completed"}, {"kind": "completed"}]
    # the steer was announced once; re-queueing the leftover is silent
    assert [info["steering"] for _, info in queued] == [False, True]
    assert agent.status == "idle"
    assert_enclosed(agent.session)


async def test_steering_during_an_aborted_step_is_redelivered_as_a_fresh_prompt(core: Context) -> None:
    agent = scripted_agent(core, [{"hang": True}, {"text": "answer"}])
    stepping = anyio.Event()
    core.on(ev.AGENT_STEP_START, lambda agent, turn, step: stepping.set())
    agent.send(text("first"))
    with anyio.fail_after(5):
        await stepping.wait()
        agent.steer(text("also this"))
        agent.abort()
        await agent.when_idle()
    assert reasons(agent) == [{"kind": "aborted", "reason": "aborted"}, {"kind": "completed"}]
    assert "steering/message" not in types_of(agent)
    turn_two = [e for e in agent.session.events if e.type == "user/message"][1]
    assert turn_two.data == {"content": text("also this"), "source": {"kind": "user"}}
    assert_enclosed(agent.session)


# -- sources, append-before-emit ----------------------------------------------------------------------------


async def test_queued_and_steering_events_carry_resolved_sources(core: Context) -> None:
    queued: list[dict[str, Any]] = []
    steering: list[tuple[int, list[ContentBlock], MessageSource]] = []
    core.on(ev.AGENT_QUEUED, lambda agent, content, info: queued.append(dict(info)))
    core.on(ev.AGENT_STEERING, lambda agent, turn, content, source: steering.append((turn, content, source)))
    agent = scripted_agent(core, [{"text": "one"}, {"text": "two"}, {"text": "three"}])
    plugin_source: MessageSource = {"kind": "plugin", "plugin": "reviewer"}
    fired = False

    def step_start(target: ReactLoopAgent, turn: int, step: int) -> None:
        nonlocal fired
        if not fired:
            fired = True
            target.steer(text("default source"))
            target.steer(text("plugin source"), plugin_source)

    core.on(ev.AGENT_STEP_START, step_start)
    agent.send(text("a"))
    agent.steer(text("b"))  # idle: exactly a send
    agent.send(text("c"), plugin_source)
    with anyio.fail_after(5):
        await agent.when_idle()
    user = {"kind": "user"}
    assert queued == [
        {"source": user, "steering": False},
        {"source": user, "steering": False},
        {"source": plugin_source, "steering": False},
        {"source": user, "steering": True},
        {"source": plugin_source, "steering": True},
    ]
    assert steering == [(1, text("default source"), user), (1, text("plugin source"), plugin_source)]
    assert [e.data["source"] for e in of_type(agent, "steering/message")] == [user, plugin_source]
    assert [e.data["source"] for e in of_type(agent, "user/message")] == [user, user, plugin_source]
    assert of_type(agent, "turn/start")[0].data["trigger"] == {"kind": "message", "source": user}


async def test_boundary_events_are_appended_before_their_emit(core: Context) -> None:
    seen: list[tuple[str, str, dict[str, Any]]] = []

    def last(agent: ReactLoopAgent) -> tuple[str, dict[str, Any]]:
        event = agent.session.events[-1]
        return event.type, event.data

    def on_step_start(agent: ReactLoopAgent, turn: int, step: int) -> None:
        seen.append(("agent/step-start", *last(agent)))

    def on_steering(agent: ReactLoopAgent, turn: int, content: list[ContentBlock], source: MessageSource) -> None:
        seen.append(("agent/steering", *last(agent)))

    def on_chunk(agent: ReactLoopAgent, turn: int, step: int, chunk: StreamChunk) -> None:
        if not any(name == "agent/stream-chunk" for name, _, _ in seen):
            seen.append(("agent/stream-chunk", *last(agent)))
            agent.steer(text("nudge"))

    core.on(ev.AGENT_STEP_START, on_step_start)
    core.on(ev.AGENT_STEERING, on_steering)
    core.on(ev.AGENT_STREAM_CHUNK, on_chunk)
    agent = scripted_agent(core, [{"text": "one two"}, {"text": "three"}])
    await prompt(agent, "go")
    assert seen == [
        ("agent/step-start", "step/start", {"turn": 1, "step": 1}),
        (
            "agent/stream-chunk",
            "assistant/chunk",
            {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "text": "one "}},
        ),
        ("agent/steering", "steering/message", {"turn": 1, "content": text("nudge"), "source": {"kind": "user"}}),
        ("agent/step-start", "step/start", {"turn": 1, "step": 2}),
    ]


# -- every boundary a plugin can throw at -------------------------------------------------------------------

Arm = Callable[[Context], None]


def _throw_on_append(kind: str) -> Arm:
    def arm(ctx: Context) -> None:
        left = 1

        def listener(session: Session, event: SessionEvent) -> None:
            nonlocal left
            if event.type == kind and left:
                left -= 1
                raise RuntimeError(f"boom on {kind}")

        ctx.on(ev.SESSION_EVENT, listener)

    return arm


def _throw_on_emit(event: ev.EmitEvent[Any], name: str) -> Arm:
    def arm(ctx: Context) -> None:
        left = 1

        def listener(*args: Any) -> None:
            nonlocal left
            if left:
                left -= 1
                raise RuntimeError(f"boom on {name}")

        ctx.on(event, listener)

    return arm


def _throw_in_waterfall(event: ev.WaterfallEvent[Any, Any, Any], name: str) -> Arm:
    def arm(ctx: Context) -> None:
        left = 1

        async def listener(*args: Any) -> Any:
            nonlocal left
            if left:
                left -= 1
                raise RuntimeError(f"boom on {name}")
            return await args[-1]()

        ctx.on(event, listener)

    return arm


BOUNDARIES: list[Any] = [
    pytest.param(_throw_on_append("turn/start"), id="append:turn/start"),
    pytest.param(_throw_on_append("user/message"), id="append:user/message"),
    pytest.param(_throw_on_append("step/start"), id="append:step/start"),
    pytest.param(_throw_on_append("assistant/chunk"), id="append:assistant/chunk"),
    pytest.param(_throw_on_append("assistant/message"), id="append:assistant/message"),
    pytest.param(_throw_on_append("usage"), id="append:usage"),
    pytest.param(_throw_on_append("tool/call"), id="append:tool/call"),
    pytest.param(_throw_on_append("tool/result"), id="append:tool/result"),
    pytest.param(_throw_on_append("steering/message"), id="append:steering/message"),
    pytest.param(_throw_on_append("step/end"), id="append:step/end"),
    pytest.param(_throw_on_emit(ev.AGENT_TURN_START, "turn-start"), id="emit:agent/turn-start"),
    pytest.param(_throw_on_emit(ev.AGENT_STEP_START, "step-start"), id="emit:agent/step-start"),
    pytest.param(_throw_on_emit(ev.AGENT_STREAM_CHUNK, "stream-chunk"), id="emit:agent/stream-chunk"),
    pytest.param(_throw_on_emit(ev.AGENT_STEERING, "steering"), id="emit:agent/steering"),
    pytest.param(_throw_on_emit(ev.AGENT_STEP_END, "step-end"), id="emit:agent/step-end"),
    pytest.param(_throw_in_waterfall(ev.AGENT_REQUEST, "request"), id="waterfall:agent/request"),
    pytest.param(_throw_in_waterfall(ev.AGENT_STEP_RESULT, "step-result"), id="waterfall:agent/step-result"),
    pytest.param(_throw_in_waterfall(ev.AGENT_TURN_CONTINUATION, "continuation"), id="waterfall:continuation"),
    pytest.param(_throw_in_waterfall(ev.LLM_STREAM, "llm-stream"), id="waterfall:llm/stream"),
]


@pytest.mark.parametrize("arm", BOUNDARIES)
async def test_every_boundary_throw_gives_one_error_event_and_one_turn_end(core: Context, arm: Arm) -> None:
    """A tool step (with steering raised while it runs) then a text step; the armed boundary throws once."""
    errors = errors_of(core)
    ToolSpy(core)
    agent = scripted_agent(
        core, [{"tool_calls": [{"name": "t"}]}, {"text": "done"}, {"text": "spare"}, {"text": "spare"}]
    )
    steered = False

    def step_start(target: ReactLoopAgent, turn: int, step: int) -> None:
        nonlocal steered
        if not steered:
            steered = True
            target.steer(text("while the step runs"))

    core.on(ev.AGENT_STEP_START, step_start)
    arm(core)
    await prompt(agent, "go")
    turn_one_ends = [e for e in of_type(agent, "turn/end") if e.data["turn"] == 1]
    assert len(turn_one_ends) == 1
    assert turn_one_ends[0].data["reason"]["kind"] == "error"
    assert turn_one_ends[0].data["reason"]["message"].startswith("boom on ")
    assert len(of_type(agent, "error")) == 1
    assert len(errors) == 1
    assert_enclosed(agent.session)  # step/end before turn/end, nothing outside a turn
    # nothing after turn 1's turn/end except a later, complete turn (a steer that was never drained)
    after = list(agent.session.events[turn_one_ends[0].seq + 1 :])
    assert not after or after[0].type == "turn/start"
    before = len(of_type(agent, "turn/end"))
    await prompt(agent, "still alive")
    assert len(of_type(agent, "turn/end")) == before + 1
    assert reasons(agent)[-1] == {"kind": "completed"}
