"""``abort()`` and ``cancel()``: the step signal, the turn-scoped marker and its windows (reference §4.4-§4.5).

Pre-step cases first let the driver park in ``wait_for_queued`` (``wait_all_tasks_blocked``), then rely on
asyncio's FIFO ready queue: a task started with ``start_soon`` runs its first step at the next checkpoint, before
the driver (woken through its inbox relay tasks) reaches window 1. Each such test asserts that precondition
(status still ``idle``, prompt still queued, waiter parked) right before it cancels.
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest

from dsh import events as ev
from dsh.events import TurnEndReason
from dsh.kernel import Context, Next
from dsh.loop._agent import ReactLoopAgent
from dsh.services.agents import Agent, AgentOptions, AgentStatus
from dsh.services.llm import ContentBlock, GenerateRequest, StreamChunk
from dsh.services.tools import ToolDefinition, ToolExecution

ABORTED_CANCELLED: TurnEndReason = {"kind": "aborted", "reason": "cancelled"}
COMPLETED: TurnEndReason = {"kind": "completed"}

# -- helpers ---------------------------------------------------------------------------------------------------


def text(value: str) -> list[ContentBlock]:
    return [{"type": "text", "text": value}]


def make_agent(core: Context, steps: list[dict[str, Any]], agent_id: str = "a") -> ReactLoopAgent:
    core.scripted_models.add(agent_id, steps)
    agent: ReactLoopAgent = core.agent_loop.create(agent_id, AgentOptions(model=f"scripted:{agent_id}"))
    return agent


async def settle(agent: ReactLoopAgent) -> None:
    with anyio.fail_after(5):
        await agent.when_idle()


async def parked() -> None:
    """Let every task run until blocked: a fresh agent's driver is then parked in ``wait_for_queued``."""
    with anyio.fail_after(5):
        await anyio.wait_all_tasks_blocked()


async def run(agent: ReactLoopAgent, prompt: str) -> None:
    agent.send(text(prompt))
    await settle(agent)


def types(agent: ReactLoopAgent) -> list[str]:
    return [event.type for event in agent.session.events]


def reasons(agent: ReactLoopAgent) -> list[Any]:
    return [event.data["reason"] for event in agent.session.events if event.type == "turn/end"]


def turn_prompts(agent: ReactLoopAgent) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    current: int | None = None
    for event in agent.session.events:
        if event.type == "turn/start":
            current = event.data["turn"]
            out[current] = []
        elif event.type == "turn/end":
            current = None
        elif event.type == "user/message":
            assert current is not None
            out[current].extend(b["text"] for b in event.data["content"] if b["type"] == "text")
    return out


def all_text(agent: ReactLoopAgent) -> str:
    return repr([event.data for event in agent.session.events])


def record_statuses(core: Context) -> list[str]:
    statuses: list[str] = []

    def on_status(agent: Agent, status: AgentStatus) -> None:
        statuses.append(status)

    core.on(ev.AGENT_STATUS, on_status)
    return statuses


def record_errors(core: Context) -> list[BaseException]:
    errors: list[BaseException] = []

    def on_error(agent: Agent, turn: int, step: int, error: BaseException) -> None:
        errors.append(error)

    core.on(ev.AGENT_ERROR, on_error)
    return errors


def model_called(core: Context) -> anyio.Event:
    """Set when the loop is about to call the model (from an ``agent/request`` listener)."""
    called = anyio.Event()

    async def on_request(
        a: Agent, turn: int, step: int, request: GenerateRequest, next: Next[GenerateRequest, GenerateRequest]
    ) -> GenerateRequest:
        called.set()
        return await next()

    core.on(ev.AGENT_REQUEST, on_request)
    return called


def count_requests(core: Context) -> list[int]:
    steps: list[int] = []

    async def on_request(
        a: Agent, turn: int, step: int, request: GenerateRequest, next: Next[GenerateRequest, GenerateRequest]
    ) -> GenerateRequest:
        steps.append(step)
        return await next()

    core.on(ev.AGENT_REQUEST, on_request)
    return steps


# -- idle and pre-step cancel ----------------------------------------------------------------------------------


async def test_idle_cancel_is_a_no_op_and_the_next_prompt_runs(core: Context) -> None:
    statuses = record_statuses(core)
    agent = make_agent(core, [{"text": "one"}, {"text": "two"}])
    agent.cancel()
    assert agent._state.cancel_requested is False, "an idle cancel with nothing pending arms no marker"
    await run(agent, "first")
    agent.cancel()  # idle again after a turn: still nothing to cancel
    assert agent._state.cancel_requested is False
    await run(agent, "second")
    assert turn_prompts(agent) == {1: ["first"], 2: ["second"]}
    assert reasons(agent) == [COMPLETED, COMPLETED]
    assert statuses == ["running", "idle", "running", "idle"]


async def test_pre_step_cancel_opens_no_turn(core: Context) -> None:
    statuses = record_statuses(core)
    requests = count_requests(core)
    agent = make_agent(core, [{"text": "only for B"}])
    agent.send(text("A"))
    agent.cancel()
    assert agent.status == "idle"
    await parked()  # the driver woke, dropped the turn and parked again
    assert agent.session.events == ()
    assert statuses == [], "window 1 drops the turn without any status flip"
    assert requests == []
    await run(agent, "B")
    assert turn_prompts(agent) == {1: ["B"]}
    assert reasons(agent) == [COMPLETED]


async def test_a_when_idle_waiter_registered_before_a_pre_step_cancel_resolves(core: Context) -> None:
    agent = make_agent(core, [{"text": "unused"}])
    await parked()
    agent.send(text("A"))
    registered: list[tuple[str, bool]] = []
    resolved = anyio.Event()

    async def waiter() -> None:
        registered.append((agent.status, agent.inbox.has_queued))  # the branch when_idle is about to take
        await agent.when_idle()
        resolved.set()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(waiter)
            await anyio.lowlevel.checkpoint()
            assert registered == [("idle", True)], "the waiter must be parked before the cancel"
            assert agent.status == "idle" and agent.inbox.has_queued, "still pre-step"
            agent.cancel()
            await resolved.wait()
    assert agent.session.events == ()
    assert agent.status == "idle"
    assert core.scripted_models.remaining("a") == 1


async def test_a_prompt_queued_during_a_pre_step_cancel_keeps_when_idle_pending(core: Context) -> None:
    statuses = record_statuses(core)
    agent = make_agent(core, [{"text": "B answer"}])
    await parked()
    agent.send(text("A"))
    registered: list[tuple[str, bool]] = []
    seen_at_release: list[dict[int, list[str]]] = []

    async def waiter() -> None:
        registered.append((agent.status, agent.inbox.has_queued))
        await agent.when_idle()
        seen_at_release.append(turn_prompts(agent))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(waiter)
            await anyio.lowlevel.checkpoint()
            assert registered == [("idle", True)]
            assert agent.status == "idle"
            agent.cancel()
            agent.send(text("B"))
    assert seen_at_release == [{1: ["B"]}], "when_idle resolved before the replacement prompt ran"
    assert reasons(agent) == [COMPLETED]
    assert statuses == ["running", "idle"]


async def test_a_prompt_sent_after_a_pre_step_cancel_runs_alone(core: Context) -> None:
    agent = make_agent(core, [{"text": "answer"}, {"text": "unused"}])
    agent.send(text("A1"))
    agent.send(text("A2"))
    agent.cancel()
    agent.send(text("B"))
    await settle(agent)
    assert turn_prompts(agent) == {1: ["B"]}
    assert "A1" not in all_text(agent) and "A2" not in all_text(agent)
    assert reasons(agent) == [COMPLETED]
    assert core.scripted_models.remaining("a") == 1


# -- cancel while running --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "reason"), [((), "cancelled"), (("session/cancel",), "session/cancel")])
async def test_mid_step_cancel_aborts_the_model_call(core: Context, args: tuple[str, ...], reason: str) -> None:
    errors = record_errors(core)
    called = model_called(core)
    agent = make_agent(core, [{"hang": True}, {"text": "after"}])
    agent.send(text("A"))
    with anyio.fail_after(5):
        await called.wait()
    assert agent.status == "running"
    agent.cancel(*args)
    await settle(agent)  # the hang step only ends when its request is aborted
    assert types(agent) == ["turn/start", "user/message", "step/start", "step/end", "turn/end"]
    assert reasons(agent) == [{"kind": "aborted", "reason": reason}]
    assert errors == []
    assert "error" not in types(agent)

    await run(agent, "next")  # a prompt after a cancelled turn runs, and the marker did not leak into it
    assert turn_prompts(agent) == {1: ["A"], 2: ["next"]}
    assert reasons(agent)[1] == COMPLETED


async def test_abort_mid_stream_ends_aborted_and_leaves_the_queue(core: Context) -> None:
    errors = record_errors(core)

    def on_chunk(a: Agent, turn: int, step: int, chunk: StreamChunk) -> None:
        if turn == 1:
            a.send(text("B"))  # queued during the step
            a.abort()

    core.on(ev.AGENT_STREAM_CHUNK, on_chunk)
    agent = make_agent(core, [{"text": "one two three four"}, {"text": "B answer"}])
    await run(agent, "A")
    turn_one = [e for e in agent.session.events if e.data.get("turn") == 1]
    assert [e.type for e in turn_one] == ["turn/start", "step/start", "assistant/chunk", "step/end", "turn/end"]
    assert reasons(agent) == [{"kind": "aborted", "reason": "aborted"}, COMPLETED]
    assert turn_prompts(agent) == {1: ["A"], 2: ["B"]}, "abort() leaves queued prompts for the next turn"
    assert errors == []


async def test_steering_during_an_aborted_step_is_redelivered_as_the_next_prompt(core: Context) -> None:
    called = model_called(core)
    agent = make_agent(core, [{"hang": True}, {"text": "after"}])
    agent.send(text("A"))
    with anyio.fail_after(5):
        await called.wait()
    agent.steer(text("S"))
    agent.abort()
    await settle(agent)
    assert reasons(agent) == [{"kind": "aborted", "reason": "aborted"}, COMPLETED]
    assert turn_prompts(agent) == {1: ["A"], 2: ["S"]}
    assert "steering/message" not in types(agent)


async def test_cancel_drops_the_turns_steering(core: Context) -> None:
    called = model_called(core)
    agent = make_agent(core, [{"hang": True}, {"text": "never"}])
    agent.send(text("A"))
    with anyio.fail_after(5):
        await called.wait()
    agent.steer(text("S"))
    agent.cancel()
    await settle(agent)
    assert reasons(agent) == [ABORTED_CANCELLED]
    assert turn_prompts(agent) == {1: ["A"]}
    assert "S" not in all_text(agent)
    assert not agent.inbox.has_queued and not agent.inbox.has_steering
    assert core.scripted_models.remaining("a") == 1


async def test_a_queued_prompt_is_never_run_nor_batched_into_the_cancelled_turn(core: Context) -> None:
    called = model_called(core)
    agent = make_agent(core, [{"hang": True}, {"text": "for C"}])
    agent.send(text("A"))
    with anyio.fail_after(5):
        await called.wait()
    agent.send(text("B"))
    agent.cancel()
    await settle(agent)
    assert turn_prompts(agent) == {1: ["A"]}
    assert reasons(agent) == [ABORTED_CANCELLED]
    assert "'B'" not in all_text(agent)
    await run(agent, "C")
    assert turn_prompts(agent) == {1: ["A"], 2: ["C"]}
    assert reasons(agent) == [ABORTED_CANCELLED, COMPLETED]


async def test_cancel_from_a_turn_start_listener_drops_the_step(core: Context) -> None:
    step_events: list[str] = []

    def on_turn_start(a: Agent, turn: int) -> None:
        if turn == 1:
            a.cancel()

    def on_step(name: str) -> Any:
        def listener(a: Agent, turn: int, step: int) -> None:
            step_events.append(f"{name} {turn}.{step}")

        return listener

    core.on(ev.AGENT_TURN_START, on_turn_start)
    core.on(ev.AGENT_STEP_START, on_step("start"))
    core.on(ev.AGENT_STEP_END, on_step("end"))
    requests = count_requests(core)
    agent = make_agent(core, [{"text": "for the next prompt"}])
    await run(agent, "A")
    assert types(agent) == ["turn/start", "user/message", "step/start", "step/end", "turn/end"]
    assert reasons(agent) == [ABORTED_CANCELLED]
    assert requests == [], "the model is never called"
    assert step_events == ["start 1.1", "end 1.1"]
    await run(agent, "B")
    assert reasons(agent) == [ABORTED_CANCELLED, COMPLETED]


@pytest.mark.parametrize("where", ["step-end", "continuation"])
async def test_cancel_in_the_continuation_window_ends_aborted_with_no_further_step(core: Context, where: str) -> None:
    ran: list[str] = []

    async def tool(arguments: Any, execution: ToolExecution) -> str:
        ran.append(execution.call_id)
        return "ok"

    def on_step_end(a: Agent, turn: int, step: int) -> None:
        a.cancel()

    async def on_continuation(a: Agent, turn: int, decision: bool, next: Next[bool, bool]) -> bool:
        a.cancel()
        return await next()

    core.tools.register(ToolDefinition("tool", "a tool", {"type": "object"}, tool))
    if where == "step-end":
        core.on(ev.AGENT_STEP_END, on_step_end)
    else:
        core.on(ev.AGENT_TURN_CONTINUATION, on_continuation)
    requests = count_requests(core)
    agent = make_agent(core, [{"tool_calls": [{"name": "tool", "id": "t1"}]}, {"text": "never"}])
    await run(agent, "A")
    assert ran == ["t1"]
    assert requests == [1]
    assert types(agent).count("step/start") == 1
    assert types(agent)[-2:] == ["step/end", "turn/end"]
    assert reasons(agent) == [ABORTED_CANCELLED]
    assert core.scripted_models.remaining("a") == 1


async def test_cancel_from_a_running_status_listener_drops_the_turn(core: Context) -> None:
    statuses: list[str] = []

    def on_status(a: Agent, status: AgentStatus) -> None:
        statuses.append(status)
        if status == "running" and statuses.count("running") == 1:
            a.cancel()

    core.on(ev.AGENT_STATUS, on_status)
    requests = count_requests(core)
    agent = make_agent(core, [{"text": "for B"}])
    await run(agent, "A")
    assert agent.session.events == ()
    assert statuses == ["running", "idle"]
    assert requests == []
    await run(agent, "B")
    assert turn_prompts(agent) == {1: ["B"]}
    assert statuses == ["running", "idle", "running", "idle"]


async def test_when_idle_waits_for_a_replacement_sent_by_a_running_listener(core: Context) -> None:
    """Seed 003: a running listener cancels A and sends B; when_idle() resolves only after B ran."""
    statuses: list[str] = []

    def on_status(a: Agent, status: AgentStatus) -> None:
        statuses.append(status)
        if status == "running" and statuses.count("running") == 1:
            a.cancel()
            a.send(text("B"))

    core.on(ev.AGENT_STATUS, on_status)
    agent = make_agent(core, [{"text": "B answer"}])
    agent.send(text("A"))
    with anyio.fail_after(5):
        await agent.when_idle()
    seen = turn_prompts(agent), reasons(agent)  # nothing may run between the release and this line
    assert seen == ({1: ["B"]}, [COMPLETED]), "when_idle() resolved before the replacement prompt ran"
    assert statuses == ["running", "idle"]
    assert "'A'" not in all_text(agent)


async def test_the_marker_never_leaks_into_the_next_prompt(core: Context) -> None:
    def on_turn_end(a: Agent, turn: int, reason: TurnEndReason) -> None:
        if turn == 1:
            a.cancel()  # running: arms the marker although the turn is already over

    core.on(ev.AGENT_TURN_END, on_turn_end)
    requests = count_requests(core)
    agent = make_agent(core, [{"text": "one"}, {"text": "two"}])
    await run(agent, "first")
    assert agent._state.cancel_requested is False, "the marker is cleared once per loop iteration"
    await run(agent, "second")
    assert reasons(agent) == [COMPLETED, COMPLETED]
    assert turn_prompts(agent) == {1: ["first"], 2: ["second"]}
    assert requests == [1, 1]
