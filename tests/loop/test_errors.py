"""Error containment (reference §4.2-§4.3) and turn-end reasons with their precedence (§4.1).

Every row of the containment map has a test here. The common contract for a failed turn: exactly one ``error``
session event, exactly one ``agent/error``, ``turn/end`` reason ``{kind: "error", message, code?}`` (the code
only when the error carries one), the log stays enclosed (nothing outside ``turn/start``/``turn/end``), and the
loop survives: the next prompt runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable
from typing import Any, cast

import anyio
import pytest
from structlog.testing import capture_logs

from dsh import events as ev
from dsh.errors import DshError
from dsh.kernel import Context
from dsh.loop._agent import ReactLoopAgent
from dsh.services.agents import AgentOptions
from dsh.services.llm import ContentBlock, GenerateRequest, Message, MessageSource, StreamChunk
from dsh.services.sessions import Session, SessionEvent
from dsh.services.tools import ToolDefinition, ToolExecution, ToolResult

# -- helpers --------------------------------------------------------------------------------------------------


def text(value: str) -> list[ContentBlock]:
    return [{"type": "text", "text": value}]


def types_of(agent: ReactLoopAgent) -> list[str]:
    return [event.type for event in agent.session.events]


def of_type(agent: ReactLoopAgent, kind: str) -> list[SessionEvent]:
    return [event for event in agent.session.events if event.type == kind]


def reasons(agent: ReactLoopAgent) -> list[dict[str, Any]]:
    return [event.data["reason"] for event in of_type(agent, "turn/end")]


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
            assert open_step is None, f"turn/end #{event.seq} with step {open_step} open"
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


class Errors:
    """Records ``agent/error`` as ``(turn, step, error)``."""

    def __init__(self, ctx: Context) -> None:
        self.calls: list[tuple[int, int, BaseException]] = []
        ctx.on(ev.AGENT_ERROR, self._record)

    def _record(self, agent: object, turn: int, step: int, error: BaseException) -> None:
        self.calls.append((turn, step, error))


def assert_failed_turn(
    agent: ReactLoopAgent, errors: Errors, turn: int, message: str, code: str | None = None, step: int | None = None
) -> None:
    """Exactly one error record for *turn*: one ``error`` event, one ``agent/error``, one ``turn/end`` error."""
    expected: dict[str, Any] = {"kind": "error", "message": message}
    if code is not None:
        expected["code"] = code
    ends = [e for e in of_type(agent, "turn/end") if e.data["turn"] == turn]
    assert len(ends) == 1
    assert ends[0].data["reason"] == expected
    logged = [e for e in of_type(agent, "error") if e.data["turn"] == turn]
    assert len(logged) == 1
    data = logged[0].data
    assert data["message"] == message
    assert data.get("code") == code
    assert ("code" in data) is (code is not None)
    if step is not None:
        assert data["step"] == step
    reported = [call for call in errors.calls if call[0] == turn]
    assert len(reported) == 1
    if step is not None:
        assert reported[0][1] == step
    assert_enclosed(agent.session)


async def prompt(agent: ReactLoopAgent, value: str) -> None:
    agent.send(text(value))
    with anyio.fail_after(5):
        await agent.when_idle()


def echo_agent(ctx: Context, agent_id: str = "a") -> ReactLoopAgent:
    agent: ReactLoopAgent = ctx.agent_loop.create(agent_id, AgentOptions(model="echo"))
    return agent


def scripted_agent(ctx: Context, steps: list[dict[str, Any]], agent_id: str = "a") -> ReactLoopAgent:
    ctx.scripted_models.add(agent_id, steps)
    agent: ReactLoopAgent = ctx.agent_loop.create(agent_id, AgentOptions(model=f"scripted:{agent_id}"))
    return agent


def once(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a listener so its body runs for the first call only."""
    fired = False

    def wrapper(*args: Any) -> Any:
        nonlocal fired
        if fired:
            return None
        fired = True
        return fn(*args)

    return wrapper


def throw_on_append(kind: str, message: str, *, times: int = 1) -> Callable[[Session, SessionEvent], None]:
    """A ``session/event`` listener that raises on the first *times* appends of type *kind*."""
    left = times

    def listener(session: Session, event: SessionEvent) -> None:
        nonlocal left
        if event.type == kind and left > 0:
            left -= 1
            raise RuntimeError(message)

    return listener


def raiser(error: BaseException) -> Callable[..., None]:
    def listener(*args: Any) -> None:
        raise error

    return listener


async def assert_survives(agent: ReactLoopAgent, value: str = "next") -> None:
    """The loop is alive: a further prompt opens a fresh turn that completes."""
    before = len(of_type(agent, "turn/start"))
    await prompt(agent, value)
    starts = of_type(agent, "turn/start")
    assert len(starts) == before + 1
    assert reasons(agent)[-1] == {"kind": "completed"}
    assert agent.status == "idle"
    assert_enclosed(agent.session)


# -- the containment map, row by row ------------------------------------------------------------------------


async def test_throw_before_turn_start_is_pushed_opens_no_turn(core: Context) -> None:
    errors = Errors(core)
    agent = echo_agent(core)
    bad_source = cast(MessageSource, {"kind": "user", "handle": object()})  # not JSON: turn/start cannot be pushed
    with capture_logs() as logs:
        agent.send(text("lost"), bad_source)
        with anyio.fail_after(5):
            await agent.when_idle()
    assert agent.session.events == ()
    assert len(errors.calls) == 1
    turn, step, _ = errors.calls[0]
    assert (turn, step) == (1, 0)
    assert any(entry["log_level"] == "warning" for entry in logs)
    assert agent.status == "idle"
    await assert_survives(agent)
    assert [e.data["turn"] for e in of_type(agent, "turn/start")] == [1]


async def test_session_event_listener_throwing_on_turn_start_closes_the_turn_as_error(core: Context) -> None:
    errors = Errors(core)
    turn_ends: list[int] = []
    core.on(ev.AGENT_TURN_END, lambda agent, turn, reason: turn_ends.append(turn))

    agent = echo_agent(core)
    core.on(ev.SESSION_EVENT, throw_on_append("turn/start", "observer broke"))
    await prompt(agent, "hello")
    assert types_of(agent)[0] == "turn/start"
    assert types_of(agent)[-1] == "turn/end"
    assert "step/start" not in types_of(agent)
    assert_failed_turn(agent, errors, 1, "observer broke", step=0)
    assert turn_ends == []
    await assert_survives(agent)


@pytest.mark.parametrize("event", [ev.AGENT_TURN_START, ev.AGENT_STEP_START], ids=["turn-start", "step-start"])
async def test_turn_start_and_step_start_listener_throws(core: Context, event: ev.EmitEvent[Any]) -> None:
    errors = Errors(core)
    turn_ends: list[int] = []
    core.on(ev.AGENT_TURN_END, lambda agent, turn, reason: turn_ends.append(turn))
    requests: list[GenerateRequest] = []

    async def on_request(agent: object, turn: int, step: int, request: GenerateRequest, next: Any) -> Any:
        requests.append(request)
        return await next()

    core.on(ev.AGENT_REQUEST, on_request)
    agent = echo_agent(core)
    core.on(event, once(raiser(DshError("listener broke", "E_LISTENER"))))
    await prompt(agent, "hello")
    expected_step = 1 if event is ev.AGENT_STEP_START else 0
    assert_failed_turn(agent, errors, 1, "listener broke", "E_LISTENER", step=expected_step)
    assert requests == []  # the model was never called
    assert turn_ends == []  # the outer catch closes the turn without an agent/turn-end emit
    if event is ev.AGENT_STEP_START:
        assert types_of(agent) == ["turn/start", "user/message", "step/start", "step/end", "error", "turn/end"]
    else:
        assert types_of(agent) == ["turn/start", "user/message", "error", "turn/end"]
    await assert_survives(agent)


async def _request_throws(agent: object, turn: int, step: int, request: GenerateRequest, next: Any) -> Any:
    raise DshError("request hook broke", "E_REQ")


async def _step_result_throws(agent: object, turn: int, step: int, message: Message, next: Any) -> Any:
    raise DshError("step-result hook broke", "E_RESULT")


async def _llm_stream_throws(request: GenerateRequest, next: Any) -> Any:
    raise DshError("llm seam broke", "E_LLM")


def _chunk_throws(agent: object, turn: int, step: int, chunk: StreamChunk) -> None:
    raise DshError("chunk observer broke", "E_CHUNK")


@pytest.mark.parametrize(
    ("event", "listener", "message", "code"),
    [
        (ev.AGENT_REQUEST, _request_throws, "request hook broke", "E_REQ"),
        (ev.AGENT_STEP_RESULT, _step_result_throws, "step-result hook broke", "E_RESULT"),
        (ev.LLM_STREAM, _llm_stream_throws, "llm seam broke", "E_LLM"),
        (ev.AGENT_STREAM_CHUNK, _chunk_throws, "chunk observer broke", "E_CHUNK"),
    ],
    ids=["agent/request", "agent/step-result", "llm/stream", "agent/stream-chunk"],
)
async def test_step_seam_throws_end_the_turn_as_error(
    core: Context, event: Any, listener: Callable[..., Any], message: str, code: str
) -> None:
    errors = Errors(core)
    emitted: list[tuple[int, dict[str, Any]]] = []
    core.on(ev.AGENT_TURN_END, lambda agent, turn, reason: emitted.append((turn, dict(reason))))
    agent = echo_agent(core)
    remove = core.on(event, listener)
    await prompt(agent, "hello world")
    await remove()
    assert_failed_turn(agent, errors, 1, message, code, step=1)
    assert "assistant/message" not in types_of(agent)
    log = types_of(agent)
    assert log.index("step/end") < log.index("error") < log.index("turn/end")
    # a step error takes the normal closing path: agent/turn-end is emitted with the error reason
    assert emitted == [(1, {"kind": "error", "message": message, "code": code})]
    await assert_survives(agent)


async def test_model_raising_mid_stream_ends_the_turn_as_error_with_its_code(core: Context) -> None:
    errors = Errors(core)
    agent = scripted_agent(core, [{"text": "half an answer", "error": {"message": "overloaded", "code": "E_503"}}])
    await prompt(agent, "hello")
    assert_failed_turn(agent, errors, 1, "overloaded", "E_503", step=1)
    assert len(of_type(agent, "assistant/chunk")) == 3  # the chunks before the throw are logged
    assert "assistant/message" not in types_of(agent)


async def test_adapter_raising_before_the_first_chunk_ends_the_turn_as_error(core: Context) -> None:
    errors = Errors(core)

    async def broken(request: GenerateRequest) -> AsyncIterator[StreamChunk]:
        raise ConnectionError("connection reset")
        yield {"type": "text-delta", "text": "unreachable"}

    core.llm.register_adapter(["broken"], broken)
    agent: ReactLoopAgent = core.agent_loop.create("a", AgentOptions(model="broken"))
    await prompt(agent, "hello")
    assert_failed_turn(agent, errors, 1, "connection reset", step=1)


@pytest.mark.parametrize("where", ["tool body", "tools/execute listener"])
async def test_tool_failures_are_error_results_not_turn_errors(core: Context, where: str) -> None:
    errors = Errors(core)
    ran: list[Any] = []

    async def tool(arguments: Any, execution: ToolExecution) -> str:
        ran.append(arguments)
        if where == "tool body":
            raise RuntimeError("kaput")
        return "fine"

    async def gate(execution: ToolExecution, next: Any) -> ToolResult:
        raise RuntimeError("kaput")

    core.tools.register(ToolDefinition("t", "a tool", {"type": "object"}, tool))
    if where == "tools/execute listener":
        core.on(ev.TOOLS_EXECUTE, gate)
    agent = scripted_agent(core, [{"tool_calls": [{"name": "t", "id": "c1", "arguments": {"x": 1}}]}, {"text": "ok"}])
    await prompt(agent, "go")
    assert ran == ([{"x": 1}] if where == "tool body" else [])
    results = of_type(agent, "tool/result")
    assert len(results) == 1
    assert results[0].data["call_id"] == "c1"
    assert results[0].data["is_error"] is True
    assert results[0].data["content"] == text("Error: kaput")
    assert "error" not in types_of(agent)
    assert errors.calls == []
    assert reasons(agent) == [{"kind": "completed"}]
    assert len(of_type(agent, "step/start")) == 2  # the model saw the error result and answered
    assert_enclosed(agent.session)


async def test_seed_000_throwing_step_end_listener_fails_a_successful_step(core: Context) -> None:
    """Seed 000's regression: one error event, turn/end error, step/end before turn/end, nothing after it."""
    errors = Errors(core)
    emitted: list[dict[str, Any]] = []
    core.on(ev.AGENT_TURN_END, lambda agent, turn, reason: emitted.append(dict(reason)))
    agent = echo_agent(core)
    remove = core.on(ev.AGENT_STEP_END, raiser(RuntimeError("step-end observer broke")))
    await prompt(agent, "hello")
    await remove()
    assert reasons(agent) == [{"kind": "error", "message": "step-end observer broke"}]
    assert len(of_type(agent, "error")) == 1
    assert_failed_turn(agent, errors, 1, "step-end observer broke", step=1)
    log = types_of(agent)
    assert log.index("step/end") < log.index("turn/end")
    assert log[-1] == "turn/end"
    assert log.count("turn/end") == 1
    assert "assistant/message" in log  # the step itself had succeeded
    assert emitted == [{"kind": "error", "message": "step-end observer broke"}]
    await assert_survives(agent)


async def test_step_end_throw_in_a_tool_step_stops_the_turn(core: Context) -> None:
    errors = Errors(core)
    core.tools.register(ToolDefinition("t", "a tool", {"type": "object"}, _ok_tool))
    agent = scripted_agent(core, [{"tool_calls": [{"name": "t"}]}, {"text": "never"}])
    core.on(ev.AGENT_STEP_END, once(raiser(RuntimeError("boom"))))
    await prompt(agent, "go")
    assert_failed_turn(agent, errors, 1, "boom", step=1)
    assert core.scripted_models.remaining("a") == 1  # no second step although the step had tool calls
    assert types_of(agent)[-3:] == ["step/end", "error", "turn/end"]


async def test_session_event_listener_throwing_on_step_end_fails_the_turn(core: Context) -> None:
    errors = Errors(core)
    agent = echo_agent(core)

    core.on(ev.SESSION_EVENT, throw_on_append("step/end", "observer broke on step/end"))
    await prompt(agent, "hello")
    assert_failed_turn(agent, errors, 1, "observer broke on step/end", step=1)
    log = types_of(agent)
    assert log.index("step/end") < log.index("error") < log.index("turn/end")
    await assert_survives(agent)


async def _ok_tool(arguments: Any, execution: ToolExecution) -> str:
    return "tool output"


async def test_throwing_turn_continuation_listener_fails_the_turn(core: Context) -> None:
    errors = Errors(core)
    core.tools.register(ToolDefinition("t", "a tool", {"type": "object"}, _ok_tool))
    agent = scripted_agent(core, [{"tool_calls": [{"name": "t"}]}, {"text": "never"}, {"text": "later"}])
    fired = False

    async def continuation(agent: object, turn: int, default: bool, next: Any) -> bool:
        nonlocal fired
        if not fired:
            fired = True
            raise DshError("continuation broke", "E_CONT")
        result: bool = await next()
        return result

    core.on(ev.AGENT_TURN_CONTINUATION, continuation)
    await prompt(agent, "go")
    assert_failed_turn(agent, errors, 1, "continuation broke", "E_CONT", step=1)
    assert len(of_type(agent, "step/start")) == 1  # the tool step would have continued by default
    assert of_type(agent, "tool/result")  # the step itself ran fully
    await assert_survives(agent, "again")


async def test_throwing_turn_end_listener_adds_nothing_after_turn_end(core: Context) -> None:
    errors = Errors(core)
    agent = echo_agent(core)
    remove = core.on(ev.AGENT_TURN_END, raiser(RuntimeError("turn-end observer broke")))
    with capture_logs() as logs:
        await prompt(agent, "hello")
    await remove()
    assert types_of(agent)[-1] == "turn/end"
    assert reasons(agent) == [{"kind": "completed"}]  # turn/end was already appended when the emit threw
    assert "error" not in types_of(agent)
    assert [(turn, step, str(error)) for turn, step, error in errors.calls] == [(1, 1, "turn-end observer broke")]
    assert any(entry["log_level"] == "warning" for entry in logs)
    assert_enclosed(agent.session)
    await assert_survives(agent)


async def test_step_error_then_throwing_turn_end_listener_reports_once(core: Context) -> None:
    errors = Errors(core)
    agent = echo_agent(core)
    core.on(ev.AGENT_REQUEST, _request_throws)
    core.on(ev.AGENT_TURN_END, raiser(RuntimeError("turn-end observer broke")))
    await prompt(agent, "hello")
    assert_failed_turn(agent, errors, 1, "request hook broke", "E_REQ", step=1)
    assert types_of(agent)[-1] == "turn/end"


async def test_session_event_listener_throwing_on_turn_end_is_contained(core: Context) -> None:
    errors = Errors(core)
    emitted: list[int] = []
    core.on(ev.AGENT_TURN_END, lambda agent, turn, reason: emitted.append(turn))
    agent = echo_agent(core)

    core.on(ev.SESSION_EVENT, throw_on_append("turn/end", "observer broke on turn/end"))
    with capture_logs() as logs:
        await prompt(agent, "hello")
    assert types_of(agent)[-1] == "turn/end"
    assert reasons(agent) == [{"kind": "completed"}]
    assert "error" not in types_of(agent)
    assert errors.calls == []
    assert emitted == [1]
    assert any(entry["log_level"] in ("error", "warning") for entry in logs)
    await assert_survives(agent)


async def test_rejecting_flush_fails_the_turn_and_the_agent_survives(core: Context) -> None:
    """#10 item 2 (this expectation changed: the turn used to end ``completed`` with the failure only logged):
    a turn whose events cannot be stored is never reported as a success. The flush before ``turn/end`` fails,
    the turn fails with that error (one ``error`` event before ``turn/end``, one ``agent/error``, one log
    line), the flush after ``turn/end`` is skipped (the next turn retries), and the next turn runs."""
    errors = Errors(core)
    calls: list[str] = []

    async def flush(session: Session) -> None:
        calls.append(session.id)
        if len(calls) == 1:
            raise OSError("disk full")

    core.on(ev.SESSION_FLUSH, flush)
    agent = echo_agent(core)
    with capture_logs() as logs:
        await prompt(agent, "hello")
    assert [(turn, step, str(error)) for turn, step, error in errors.calls] == [(1, 1, "disk full")]
    assert types_of(agent)[-2:] == ["error", "turn/end"]
    assert reasons(agent) == [{"kind": "error", "message": "disk full"}]
    assert [entry["log_level"] for entry in logs if "flush" in entry["event"]] == ["warning"]
    assert len(calls) == 1
    await assert_survives(agent)
    assert len(calls) == 3  # the next turn flushes before and after its turn/end


async def test_throwing_status_listener_is_contained(core: Context) -> None:
    seen: list[str] = []

    def listener(agent: object, status: str) -> None:
        seen.append(status)
        raise RuntimeError("status observer broke")

    core.on(ev.AGENT_STATUS, listener)
    agent = echo_agent(core)
    with capture_logs() as logs:
        await prompt(agent, "hello")
        await prompt(agent, "again")
    assert seen == ["running", "idle", "running", "idle"]
    assert reasons(agent) == [{"kind": "completed"}, {"kind": "completed"}]
    assert "error" not in types_of(agent)
    assert sum(1 for entry in logs if "status" in entry["event"]) == 4


async def test_throwing_agent_error_listener_is_swallowed(core: Context) -> None:
    errors = Errors(core)  # registered first: a throwing listener stops the listeners after it
    core.on(ev.AGENT_ERROR, raiser(RuntimeError("error observer broke")))
    emitted: list[dict[str, Any]] = []
    core.on(ev.AGENT_TURN_END, lambda agent, turn, reason: emitted.append(dict(reason)))
    agent = echo_agent(core)
    remove = core.on(ev.AGENT_REQUEST, _request_throws)
    await prompt(agent, "hello")
    await remove()
    assert_failed_turn(agent, errors, 1, "request hook broke", "E_REQ", step=1)
    # the turn took its normal closing path: the throw never reached the driver
    assert emitted == [{"kind": "error", "message": "request hook broke", "code": "E_REQ"}]
    await assert_survives(agent)


@pytest.mark.parametrize("failure", ["pre-turn failure", "flush failure"])
async def test_throwing_agent_error_listener_cannot_kill_the_loop_on_other_reports(core: Context, failure: str) -> None:
    errors = Errors(core)
    core.on(ev.AGENT_ERROR, raiser(RuntimeError("error observer broke")))
    agent = echo_agent(core)
    if failure == "pre-turn failure":
        agent.send(text("lost"), cast(MessageSource, {"kind": "user", "handle": object()}))
    else:
        calls = 0

        async def flush(session: Session) -> None:
            nonlocal calls
            calls += 1
            if calls == 1:
                raise OSError("disk full")

        core.on(ev.SESSION_FLUSH, flush)
        agent.send(text("hello"))
    with anyio.fail_after(5):
        await agent.when_idle()
    assert len(errors.calls) == 1
    await assert_survives(agent)


async def test_several_throwing_listeners_in_one_turn_give_one_error_record(core: Context) -> None:
    errors = Errors(core)
    agent = echo_agent(core)
    core.on(ev.AGENT_STEP_END, once(raiser(RuntimeError("first"))))

    async def continuation(agent: object, turn: int, default: bool, next: Any) -> bool:
        raise RuntimeError("second")

    core.on(ev.AGENT_TURN_CONTINUATION, continuation)
    core.on(ev.AGENT_TURN_END, once(raiser(RuntimeError("third"))))
    await prompt(agent, "hello")
    assert_failed_turn(agent, errors, 1, "first", step=1)
    assert types_of(agent).count("turn/end") == 1


# -- reasons and precedence ---------------------------------------------------------------------------------


async def test_max_tokens_finish_ends_the_turn_max_tokens(core: Context) -> None:
    errors = Errors(core)
    agent = scripted_agent(core, [{"text": "cut short", "finish": "max-tokens"}])
    await prompt(agent, "hello")
    assert reasons(agent) == [{"kind": "max-tokens"}]
    assert [e.data["content"] for e in of_type(agent, "assistant/message")] == [text("cut short")]
    assert "error" not in types_of(agent)
    assert errors.calls == []


async def test_max_tokens_tool_calls_are_never_dispatched_and_safe_text_is_kept(core: Context) -> None:
    ran: list[Any] = []

    async def tool(arguments: Any, execution: ToolExecution) -> str:
        ran.append(arguments)
        return "ran"

    core.tools.register(ToolDefinition("t", "a tool", {"type": "object"}, tool))
    agent = scripted_agent(
        core, [{"text": "safe text", "tool_calls": [{"name": "t", "arguments": {"a": 1}}], "finish": "max-tokens"}]
    )
    await prompt(agent, "hello")
    assert ran == []
    assert "tool/call" not in types_of(agent)
    assert "tool/result" not in types_of(agent)
    messages = of_type(agent, "assistant/message")
    assert [m.data["content"] for m in messages] == [text("safe text")]
    assert all(block["type"] != "tool-call" for m in agent.session.derive_messages() for block in m["content"])
    assert reasons(agent) == [{"kind": "max-tokens"}]
    assert len(of_type(agent, "step/start")) == 1


async def test_max_tokens_tool_calls_stripped_again_after_step_result(core: Context) -> None:
    async def step_result(agent: object, turn: int, step: int, message: Message, next: Any) -> Message:
        call: ContentBlock = {"type": "tool-call", "id": "sneaky", "name": "t", "arguments": "{}"}
        return {"role": "assistant", "content": [*message["content"], call]}

    core.on(ev.AGENT_STEP_RESULT, step_result)
    agent = scripted_agent(core, [{"text": "partial", "finish": "max-tokens"}])
    await prompt(agent, "hello")
    assert [m.data["content"] for m in of_type(agent, "assistant/message")] == [text("partial")]
    assert "tool/call" not in types_of(agent)
    assert reasons(agent) == [{"kind": "max-tokens"}]


async def test_max_tokens_with_only_tool_calls_logs_no_assistant_message(core: Context) -> None:
    agent = scripted_agent(core, [{"tool_calls": [{"name": "t"}], "finish": "max-tokens"}])
    await prompt(agent, "hello")
    assert "assistant/message" not in types_of(agent)
    assert "tool/call" not in types_of(agent)
    assert "usage" in types_of(agent)
    assert reasons(agent) == [{"kind": "max-tokens"}]


def _force_first_continuation(ctx: Context) -> None:
    fired = False

    async def continuation(agent: object, turn: int, default: bool, next: Any) -> bool:
        nonlocal fired
        if not fired:
            fired = True
            return True
        result: bool = await next()
        return result

    ctx.on(ev.AGENT_TURN_CONTINUATION, continuation)


async def test_max_tokens_is_sticky_within_the_turn_and_never_leaks(core: Context) -> None:
    agent = scripted_agent(
        core, [{"text": "cut", "finish": "max-tokens"}, {"text": "recovered"}, {"text": "next turn"}]
    )
    _force_first_continuation(core)
    await prompt(agent, "hello")
    assert len(of_type(agent, "step/start")) == 2
    assert reasons(agent) == [{"kind": "max-tokens"}]  # a later good step does not reset it
    await prompt(agent, "again")
    assert reasons(agent) == [{"kind": "max-tokens"}, {"kind": "completed"}]


async def test_a_later_step_error_overrides_max_tokens(core: Context) -> None:
    errors = Errors(core)
    agent = scripted_agent(core, [{"text": "cut", "finish": "max-tokens"}, {"error": {"message": "down", "code": "E"}}])
    _force_first_continuation(core)
    await prompt(agent, "hello")
    assert_failed_turn(agent, errors, 1, "down", "E", step=2)


async def test_aborted_beats_max_tokens(core: Context) -> None:
    agent = scripted_agent(core, [{"text": "cut", "finish": "max-tokens"}, {"hang": True}])
    _force_first_continuation(core)
    core.on(ev.AGENT_STEP_START, lambda target, turn, step: target.cancel("user") if step == 2 else None)
    await prompt(agent, "hello")
    assert reasons(agent) == [{"kind": "aborted", "reason": "user"}]


async def test_aborted_beats_error(core: Context) -> None:
    errors = Errors(core)
    agent = echo_agent(core)

    def listener(target: ReactLoopAgent, turn: int, step: int, chunk: StreamChunk) -> None:
        target.abort("stop it")
        raise RuntimeError("and then broke")

    core.on(ev.AGENT_STREAM_CHUNK, once(listener))
    await prompt(agent, "hello world")
    assert reasons(agent) == [{"kind": "aborted", "reason": "stop it"}]
    assert "error" not in types_of(agent)
    assert errors.calls == []
    assert_enclosed(agent.session)
    await assert_survives(agent)


async def test_disposed_beats_aborted_and_error(core: Context) -> None:
    errors = Errors(core)
    handle = await core.agents.create(agent_id="a", session_id="s", agent_options=AgentOptions(model="echo"))
    agent = cast(ReactLoopAgent, handle.agent)

    def listener(target: ReactLoopAgent, turn: int, step: int, chunk: StreamChunk) -> None:
        target.abort("stop it")
        target.dispose_now()
        raise RuntimeError("and then broke")

    core.on(ev.AGENT_STREAM_CHUNK, once(listener))
    agent.send(text("hello world"))
    with anyio.fail_after(5):
        await agent.when_idle()
        await handle.dispose()
    assert reasons(agent) == [{"kind": "disposed"}]
    assert "error" not in types_of(agent)
    assert errors.calls == []
    assert_enclosed(agent.session)


async def test_a_throwing_turn_end_listener_during_disposal_preserves_disposed(core: Context) -> None:
    errors = Errors(core)
    core.scripted_models.add("slow", [{"text": "one two three", "delay": 5}])
    handle = await core.agents.create(agent_id="a", session_id="s", agent_options=AgentOptions(model="scripted:slow"))
    agent = cast(ReactLoopAgent, handle.agent)
    streaming = anyio.Event()
    core.on(ev.AGENT_STREAM_CHUNK, lambda target, turn, step, chunk: streaming.set())
    core.on(ev.AGENT_TURN_END, raiser(RuntimeError("turn-end observer broke")))
    agent.send(text("hello"))
    with anyio.fail_after(5):
        await streaming.wait()
        await handle.dispose()
    assert reasons(agent) == [{"kind": "disposed"}]
    assert types_of(agent)[-1] == "turn/end"
    assert "error" not in types_of(agent)
    assert errors.calls == []
    assert_enclosed(agent.session)


async def test_finish_error_ends_the_turn_error_with_its_code(core: Context) -> None:
    errors = Errors(core)
    agent = scripted_agent(core, [{"text": "some", "finish": "error"}])
    await prompt(agent, "hello")
    assert_failed_turn(agent, errors, 1, "scripted finish error", "SCRIPTED", step=1)


async def test_raised_model_error_without_code_has_no_code_key(core: Context) -> None:
    errors = Errors(core)
    agent = scripted_agent(core, [{"error": "plain failure"}])
    await prompt(agent, "hello")
    assert_failed_turn(agent, errors, 1, "plain failure", None, step=1)


async def test_adapter_finish_aborted_is_an_error_coded_aborted(core: Context) -> None:
    errors = Errors(core)

    async def gives_up(request: GenerateRequest) -> AsyncIterator[StreamChunk]:
        yield {"type": "text-delta", "text": "partial"}
        yield {"type": "finish", "reason": {"kind": "aborted"}}

    core.llm.register_adapter(["gives-up"], gives_up)
    agent: ReactLoopAgent = core.agent_loop.create("a", AgentOptions(model="gives-up"))
    await prompt(agent, "hello")
    assert_failed_turn(agent, errors, 1, "model stream aborted", "ABORTED", step=1)
    assert reasons(agent)[0]["kind"] == "error"


async def test_an_unknown_model_is_an_error_coded_no_adapter(core: Context) -> None:
    errors = Errors(core)
    agent: ReactLoopAgent = core.agent_loop.create("a", AgentOptions(model="nobody:serves-this"))
    await prompt(agent, "hello")
    reason = reasons(agent)[0]
    assert reason["kind"] == "error"
    assert reason.get("code") == "NO_ADAPTER"
    assert "nobody:serves-this" in reason["message"]
    assert_failed_turn(agent, errors, 1, reason["message"], "NO_ADAPTER", step=1)


async def test_no_model_configured_is_an_error_naming_agent_options_model(core: Context) -> None:
    errors = Errors(core)
    agent: ReactLoopAgent = core.agent_loop.create("a", AgentOptions())
    await prompt(agent, "hello")
    assert len(errors.calls) == 1
    reason = reasons(agent)[0]
    assert reason["kind"] == "error"
    assert "AgentOptions.model" in reason["message"]
    assert '"a"' in reason["message"]
    assert_failed_turn(agent, errors, 1, reason["message"], reason.get("code"), step=1)


async def test_an_agent_request_listener_can_supply_the_model(core: Context) -> None:
    async def supply(agent: object, turn: int, step: int, request: GenerateRequest, next: Any) -> Any:
        return await next(dataclasses.replace(request, model="echo"))

    core.on(ev.AGENT_REQUEST, supply)
    agent: ReactLoopAgent = core.agent_loop.create("a", AgentOptions())
    await prompt(agent, "hello there")
    assert reasons(agent) == [{"kind": "completed"}]
    assert [m.data["content"] for m in of_type(agent, "assistant/message")] == [text("hello there")]
