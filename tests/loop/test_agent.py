"""``ReactLoopAgent``: disposal, inject enclosure, status, ``when_idle`` and ``abort`` (reference §4.4-§5, agent.spec)."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest

from dsh import events as ev
from dsh.events import QueuedInfo, TurnEndReason
from dsh.kernel import Context, Next
from dsh.loop._agent import ReactLoopAgent
from dsh.loop._state import AgentDisposedError
from dsh.services.agents import Agent, AgentHandle, AgentOptions, AgentStatus
from dsh.services.llm import ContentBlock, GenerateRequest
from dsh.services.sessions import Session, SessionEvent

COMPLETED: TurnEndReason = {"kind": "completed"}
DISPOSED: TurnEndReason = {"kind": "disposed"}

# -- helpers ---------------------------------------------------------------------------------------------------


def text(value: str) -> list[ContentBlock]:
    return [{"type": "text", "text": value}]


def make_agent(core: Context, steps: list[dict[str, Any]], agent_id: str = "a") -> ReactLoopAgent:
    core.scripted_models.add(agent_id, steps)
    agent: ReactLoopAgent = core.agent_loop.create(agent_id, AgentOptions(model=f"scripted:{agent_id}"))
    return agent


async def make_handle(core: Context, steps: list[dict[str, Any]], agent_id: str = "a") -> AgentHandle:
    core.scripted_models.add(agent_id, steps)
    handle: AgentHandle = await core.agents.create(
        agent_id=agent_id,
        session_id=f"{agent_id}-sid",
        meta={"cwd": "/tmp/project"},
        agent_options=AgentOptions(model=f"scripted:{agent_id}"),
    )
    return handle


def loop_agent(handle: AgentHandle) -> ReactLoopAgent:
    agent = handle.agent
    assert isinstance(agent, ReactLoopAgent)
    return agent


async def settle(agent: Agent) -> None:
    with anyio.fail_after(5):
        await agent.when_idle()


async def run(agent: Agent, prompt: str) -> None:
    agent.send(text(prompt))
    await settle(agent)


def resolves_without_suspending(agent: Agent) -> bool:
    """Drive one step of ``when_idle()`` by hand: True when it returns without ever yielding to the loop."""
    coroutine = agent.when_idle()
    try:
        coroutine.send(None)
    except StopIteration:
        return True
    coroutine.close()
    return False


def types(agent: Agent) -> list[str]:
    return [event.type for event in agent.session.events]


def reasons(agent: Agent) -> list[Any]:
    return [event.data["reason"] for event in agent.session.events if event.type == "turn/end"]


def triggers(agent: Agent) -> list[tuple[int, str]]:
    return [(e.data["turn"], e.data["trigger"]["kind"]) for e in agent.session.events if e.type == "turn/start"]


def record_statuses(core: Context) -> list[tuple[str, str]]:
    statuses: list[tuple[str, str]] = []

    def on_status(agent: Agent, status: AgentStatus) -> None:
        statuses.append((agent.id, status))

    core.on(ev.AGENT_STATUS, on_status)
    return statuses


def model_called(core: Context) -> anyio.Event:
    called = anyio.Event()

    async def on_request(
        a: Agent, turn: int, step: int, request: GenerateRequest, next: Next[GenerateRequest, GenerateRequest]
    ) -> GenerateRequest:
        called.set()
        return await next()

    core.on(ev.AGENT_REQUEST, on_request)
    return called


# -- disposal --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["send", "steer", "inject"])
async def test_send_steer_and_inject_raise_after_disposal(core: Context, method: str) -> None:
    handle = await make_handle(core, [])
    agent = loop_agent(handle)
    await handle.dispose()
    with pytest.raises(AgentDisposedError) as caught:
        getattr(agent, method)(text("too late"))
    assert str(caught.value) == 'agent "a" is disposed'
    assert isinstance(caught.value, RuntimeError)
    assert agent.session.events == ()


async def test_agent_handle_dispose_stops_the_loop_and_unregisters_the_agent(core: Context) -> None:
    disposed: list[str] = []

    def on_disposed(agent: Agent) -> None:
        disposed.append(agent.id)

    core.on(ev.AGENT_DISPOSED, on_disposed)
    handle = await make_handle(core, [{"text": "ok"}])
    agent = loop_agent(handle)
    assert core.agents.get("a") is agent
    assert agent.session.id == "a-sid"
    assert agent.session.header.cwd == "/tmp/project"
    assert core.sessions.get("a-sid") is agent.session
    await run(agent, "go")
    assert reasons(agent) == [COMPLETED]

    with anyio.fail_after(5):
        await handle.dispose()
    assert agent.status == "disposed"
    assert core.agents.get("a") is None
    assert disposed == ["a"]
    assert core.sessions.get("a-sid") is None, "the session is detached after the loop stopped"
    with anyio.fail_after(5):
        await agent.wait_done()  # the loop exited
        await agent.when_idle()
    assert types(agent)[-1] == "turn/end", "disposing an idle agent writes nothing"


async def test_the_disposer_is_idempotent(core: Context) -> None:
    statuses = record_statuses(core)
    disposed: list[str] = []

    def on_disposed(agent: Agent) -> None:
        disposed.append(agent.id)

    core.on(ev.AGENT_DISPOSED, on_disposed)
    handle = await make_handle(core, [])
    agent = loop_agent(handle)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(handle.dispose)
            group.start_soon(handle.dispose)
        await handle.dispose()
    agent.dispose_now()
    assert statuses == [("a", "disposed")]
    assert disposed == ["a"]
    assert agent.status == "disposed"


async def test_disposal_mid_turn_ends_the_turn_disposed_and_flushes_it(core: Context) -> None:
    trace: list[str] = []
    flushed: list[Any] = []

    def on_status(a: Agent, status: AgentStatus) -> None:
        trace.append(f"status {status}")

    def on_turn_end(a: Agent, turn: int, reason: TurnEndReason) -> None:
        trace.append(f"turn-end {reason['kind']}")

    async def on_flush(session: Session) -> None:
        flushed.append(session.events[-1].data)
        trace.append("flush")

    def on_disposed(a: Agent) -> None:
        trace.append("agent/disposed")

    def on_event(session: Session, event: SessionEvent) -> None:
        if event.type == "turn/end":
            trace.append("session/event turn/end")

    core.on(ev.SESSION_EVENT, on_event)
    core.on(ev.AGENT_STATUS, on_status)
    core.on(ev.AGENT_TURN_END, on_turn_end)
    core.on(ev.SESSION_FLUSH, on_flush)
    core.on(ev.AGENT_DISPOSED, on_disposed)
    called = model_called(core)
    handle = await make_handle(core, [{"hang": True}])
    agent = loop_agent(handle)
    agent.send(text("go"))
    with anyio.fail_after(5):
        await called.wait()
        await handle.dispose()
    assert agent.status == "disposed"
    assert types(agent) == ["turn/start", "user/message", "step/start", "step/end", "turn/end"]
    assert reasons(agent) == [DISPOSED]
    assert flushed == [{"turn": 1, "reason": DISPOSED}], "the closing turn/end is handed to storage"
    assert trace == [
        "status running",
        "status disposed",
        "session/event turn/end",  # still attached: a persistence backend captures it
        "turn-end disposed",
        "flush",
        "agent/disposed",
    ]
    assert core.agents.get("a") is None


async def test_disposal_of_a_plugin_owned_agent_mid_turn(core: Context) -> None:
    """``ctx.agent_loop.create`` ties the agent to the calling plugin: removing the plugin disposes it."""
    called = model_called(core)
    core.scripted_models.add("a", [{"hang": True}])
    created: list[ReactLoopAgent] = []

    def owner(ctx: Context, config: object) -> None:
        created.append(ctx.agent_loop.create("a", AgentOptions(model="scripted:a")))

    remove = core.plugin(owner)
    [agent] = created
    agent.send(text("go"))
    with anyio.fail_after(5):
        await called.wait()
        await remove()
    assert agent.status == "disposed"
    assert reasons(agent) == [DISPOSED]
    assert core.agents.get("a") is None


async def test_disposal_before_the_turn_starts_opens_no_turn(core: Context) -> None:
    requests: list[int] = []

    async def on_request(
        a: Agent, turn: int, step: int, request: GenerateRequest, next: Next[GenerateRequest, GenerateRequest]
    ) -> GenerateRequest:
        requests.append(step)
        return await next()

    core.on(ev.AGENT_REQUEST, on_request)
    handle = await make_handle(core, [{"text": "never"}])
    agent = loop_agent(handle)
    agent.send(text("queued, never started"))
    with anyio.fail_after(5):
        await handle.dispose()
    assert agent.session.events == ()
    assert requests == []
    assert agent.status == "disposed"


# -- inject ----------------------------------------------------------------------------------------------------


async def test_inject_enclosure_is_decided_from_the_log_after_turn_end(core: Context) -> None:
    """Status is still ``running`` in an agent/turn-end listener, but the log's turn is closed."""
    seen_status: list[str] = []

    def on_turn_end(a: Agent, turn: int, reason: TurnEndReason) -> None:
        if turn == 1:
            seen_status.append(a.status)
            a.inject(text("late context"))

    core.on(ev.AGENT_TURN_END, on_turn_end)
    agent = make_agent(core, [{"text": "one"}, {"text": "two"}])
    await run(agent, "first")
    assert seen_status == ["running"]
    names = types(agent)
    first_end = names.index("turn/end")
    assert names[first_end:] == ["turn/end", "turn/start", "context/message", "turn/end"]
    assert triggers(agent) == [(1, "message"), (2, "injection")]
    await run(agent, "second")
    assert triggers(agent) == [(1, "message"), (2, "injection"), (3, "message")]
    assert reasons(agent) == [COMPLETED] * 3


async def test_inject_enclosure_is_decided_from_the_log_before_turn_start(core: Context) -> None:
    """Status is ``running`` in an agent/status listener, but no turn is open in the log yet."""

    def on_status(a: Agent, status: AgentStatus) -> None:
        if status == "running":
            a.inject(text("early context"))

    core.on(ev.AGENT_STATUS, on_status)
    agent = make_agent(core, [{"text": "ok"}])
    await run(agent, "go")
    assert types(agent)[:4] == ["turn/start", "context/message", "turn/end", "turn/start"]
    assert triggers(agent) == [(1, "injection"), (2, "message")]
    assert reasons(agent) == [COMPLETED, COMPLETED]


async def test_idle_inject_flush_failure_is_contained_and_reported_with_step_zero(core: Context) -> None:
    failures: list[tuple[int, int, str]] = []
    reported = anyio.Event()
    calls: list[int] = []

    async def on_flush(session: Session) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("disk full")

    def on_error(a: Agent, turn: int, step: int, error: BaseException) -> None:
        failures.append((turn, step, str(error)))
        reported.set()

    core.on(ev.SESSION_FLUSH, on_flush)
    core.on(ev.AGENT_ERROR, on_error)
    agent = make_agent(core, [{"text": "ok"}])
    agent.inject(text("context"))  # must not raise: the flush is fire-and-forget
    with anyio.fail_after(5):
        await reported.wait()
    assert failures == [(1, 0, "disk full")]
    assert types(agent) == ["turn/start", "context/message", "turn/end"], "never a session event after turn/end"
    await run(agent, "go")
    assert reasons(agent) == [COMPLETED, COMPLETED]
    assert failures == [(1, 0, "disk full")]
    assert agent.status == "idle"


async def test_inject_with_a_non_serializable_source_opens_no_turn(core: Context) -> None:
    agent = make_agent(core, [{"text": "ok"}])
    bad_source: Any = {"kind": "plugin", "plugin": {1, 2}}
    with pytest.raises((TypeError, ValueError)):
        agent.inject(text("context"), bad_source)
    assert agent.session.events == ()
    await run(agent, "go")
    assert triggers(agent) == [(1, "message")]
    assert reasons(agent) == [COMPLETED]


@pytest.mark.parametrize("failing", ["turn/start", "context/message", "turn/end"])
async def test_idle_inject_still_closes_its_turn_when_a_session_event_listener_throws(
    core: Context, failing: str
) -> None:
    armed = [True]
    flushed = anyio.Event()

    def on_event(session: Session, event: SessionEvent) -> None:
        if armed[0] and event.type == failing:
            raise RuntimeError(f"listener broke on {failing}")

    async def on_flush(session: Session) -> None:
        flushed.set()

    core.on(ev.SESSION_EVENT, on_event)
    core.on(ev.SESSION_FLUSH, on_flush)
    agent = make_agent(core, [{"text": "ok"}])
    if failing == "turn/end":
        agent.inject(text("context"))  # a throwing turn/end listener is swallowed
    else:
        with pytest.raises(RuntimeError, match="listener broke"):
            agent.inject(text("context"))
    armed[0] = False
    expected = ["turn/start", "turn/end"] if failing == "turn/start" else ["turn/start", "context/message", "turn/end"]
    assert types(agent) == expected
    assert reasons(agent) == [COMPLETED]
    with anyio.fail_after(5):
        await flushed.wait()  # and it is still checkpointed
    await run(agent, "go")
    assert triggers(agent) == [(1, "injection"), (2, "message")]
    assert reasons(agent) == [COMPLETED, COMPLETED]


async def test_an_idle_inject_flush_completes_when_the_agent_is_disposed_right_after(core: Context) -> None:
    finished: list[list[str]] = []

    async def slow_flush(session: Session) -> None:
        await anyio.lowlevel.checkpoint()  # a backend that awaits its I/O
        finished.append([event.type for event in session.events])

    core.on(ev.SESSION_FLUSH, slow_flush)
    handle = await make_handle(core, [])
    handle.agent.inject(text("remember this"))
    with anyio.fail_after(5):
        await handle.dispose()
        await anyio.wait_all_tasks_blocked()
    assert finished == [["turn/start", "context/message", "turn/end"]], "the injected turn was never checkpointed"


# -- status ----------------------------------------------------------------------------------------------------


async def test_a_duplicate_status_is_not_re_emitted(core: Context) -> None:
    statuses = record_statuses(core)

    def on_turn_start(a: Agent, turn: int) -> None:
        if turn == 1:
            a.send(text("chained"))

    core.on(ev.AGENT_TURN_START, on_turn_start)
    agent = make_agent(core, [{"text": "one"}, {"text": "two"}])
    await run(agent, "first")
    assert len(reasons(agent)) == 2
    assert statuses == [("a", "running"), ("a", "idle")], "running is not re-emitted for the chained turn"


async def test_no_status_follows_disposed(core: Context) -> None:
    statuses = record_statuses(core)
    called = model_called(core)
    handle = await make_handle(core, [{"hang": True}])
    agent = loop_agent(handle)
    agent.send(text("go"))
    with anyio.fail_after(5):
        await called.wait()
        agent.dispose_now()
        await agent.wait_done()  # the driver finishes its iteration, which would normally set idle
    assert statuses == [("a", "running"), ("a", "disposed")]
    await handle.dispose()
    assert statuses == [("a", "running"), ("a", "disposed")]


async def test_throwing_status_listeners_are_contained(core: Context) -> None:
    seen: list[str] = []

    def broken(a: Agent, status: AgentStatus) -> None:
        seen.append(status)
        raise RuntimeError(f"status listener broke on {status}")

    core.on(ev.AGENT_STATUS, broken)
    handle = await make_handle(core, [{"text": "one"}, {"text": "two"}])
    agent = loop_agent(handle)
    await run(agent, "first")
    await run(agent, "second")
    assert reasons(agent) == [COMPLETED, COMPLETED]
    with anyio.fail_after(5):
        await handle.dispose()
    assert seen == ["running", "idle", "running", "idle", "disposed"]
    assert agent.status == "disposed"
    assert core.agents.get("a") is None


async def test_the_default_source_is_a_fresh_value_for_every_message(core: Context) -> None:
    mutated: list[tuple[Any, str]] = []

    def careless(a: Agent, content: list[ContentBlock], info: QueuedInfo) -> None:
        if a.id == "first":
            source: Any = info["source"]
            mutated.append((source, source["kind"]))
            source["kind"] = "plugin"  # mutates the payload it was handed

    core.on(ev.AGENT_QUEUED, careless)
    try:
        first = make_agent(core, [{"text": "ok"}], agent_id="first")
        second = make_agent(core, [{"text": "ok"}], agent_id="second")
        await run(first, "one")
        await run(second, "two")
        sources = [e.data["source"] for e in second.session.events if e.type == "user/message"]
        assert sources == [{"kind": "user"}], "another agent's listener changed this agent's default source"
    finally:
        for source, kind in mutated:  # undo the damage: the shared default outlives this test's App
            source["kind"] = kind


# -- when_idle -------------------------------------------------------------------------------------------------


async def test_when_idle_is_immediate_when_idle_with_nothing_queued(core: Context) -> None:
    agent = make_agent(core, [{"text": "ok"}])
    assert resolves_without_suspending(agent)
    await run(agent, "go")
    assert resolves_without_suspending(agent)


async def test_when_idle_waits_for_a_queued_prompt_that_has_not_started(core: Context) -> None:
    agent = make_agent(core, [{"text": "ok"}])
    agent.send(text("go"))
    assert agent.status == "idle", "queued, not yet running"
    assert not resolves_without_suspending(agent)
    await settle(agent)
    assert reasons(agent) == [COMPLETED]
    assert agent.status == "idle"


async def test_when_idle_ignores_other_agents(core: Context) -> None:
    called = model_called(core)
    busy = make_agent(core, [{"hang": True}], agent_id="busy")
    quiet = make_agent(core, [{"text": "ok"}], agent_id="quiet")
    busy.send(text("hang"))
    with anyio.fail_after(5):
        await called.wait()
    assert busy.status == "running"
    assert resolves_without_suspending(quiet)
    await run(quiet, "go")
    assert reasons(quiet) == [COMPLETED]
    assert busy.status == "running" and reasons(busy) == []
    busy.cancel()
    await settle(busy)
    assert reasons(busy) == [{"kind": "aborted", "reason": "cancelled"}]


@pytest.mark.parametrize("registered", ["before disposal", "after disposal"])
async def test_when_idle_awaits_the_loop_exit_when_disposed(core: Context, registered: str) -> None:
    flush_done: list[bool] = []

    async def slow_flush(session: Session) -> None:
        for _ in range(10):
            await anyio.lowlevel.checkpoint()
        flush_done.append(True)

    core.on(ev.SESSION_FLUSH, slow_flush)
    called = model_called(core)
    agent = make_agent(core, [{"hang": True}])
    agent.send(text("go"))
    seen: list[tuple[list[Any], list[bool]]] = []

    async def waiter() -> None:
        await agent.when_idle()
        seen.append((reasons(agent), list(flush_done)))

    with anyio.fail_after(5):
        await called.wait()
        async with anyio.create_task_group() as group:
            if registered == "before disposal":
                group.start_soon(waiter)
                await anyio.lowlevel.checkpoint()
                agent.dispose_now()
            else:
                agent.dispose_now()
                group.start_soon(waiter)
    assert seen == [([DISPOSED], [True])], "when_idle() returned before the loop exited"


# -- abort -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "reason"), [((), "aborted"), (("stop now",), "stop now")])
async def test_abort_reason(core: Context, args: tuple[str, ...], reason: str) -> None:
    called = model_called(core)
    agent = make_agent(core, [{"hang": True}])
    agent.send(text("go"))
    with anyio.fail_after(5):
        await called.wait()
    agent.abort(*args)
    await settle(agent)
    assert reasons(agent) == [{"kind": "aborted", "reason": reason}]


async def test_abort_before_the_step_touches_nothing(core: Context) -> None:
    agent = make_agent(core, [{"text": "ok"}])
    agent.abort()  # idle: no step in flight
    agent.send(text("go"))
    agent.abort()  # queued, not started: abort is not cancel
    await settle(agent)
    assert reasons(agent) == [COMPLETED]
