"""The agents service: registry, factory seam and memoized handles (``dsh.services.agents``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from dsh import events as ev
from dsh.kernel import Context, plugin
from dsh.services.agents import (
    Agent,
    AgentHandle,
    AgentOptions,
    AgentRegistry,
    NoAgentFactoryError,
    agents_plugin,
)
from tests.conftest import Recorder

PLUGINS = (agents_plugin,)
"""What the shared ``ctx`` fixture (``tests/conftest.py``) loads, in order."""


@pytest.fixture
def agents(ctx: Context) -> AgentRegistry:
    return ctx.agents


@dataclass
class FakeAgent:
    """Just enough of :class:`Agent` for the registry (it only reads ``id``)."""

    id: str


def _agent(agent_id: str) -> Agent:
    return FakeAgent(agent_id)  # type: ignore[return-value]


@dataclass
class FakeFactory:
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    async def create_agent(
        self,
        *,
        agent_id: str,
        session_id: str,
        meta: dict[str, Any] | None = None,
        agent_options: AgentOptions | None = None,
    ) -> AgentHandle:
        self.calls.append(
            ("create", {"agent_id": agent_id, "session_id": session_id, "meta": meta, "agent_options": agent_options})
        )
        return AgentHandle(_agent(agent_id), _noop)

    async def resume_agent(
        self, *, agent_id: str, resume_session_id: str, agent_options: AgentOptions | None = None
    ) -> AgentHandle:
        self.calls.append(
            ("resume", {"agent_id": agent_id, "resume_session_id": resume_session_id, "agent_options": agent_options})
        )
        return AgentHandle(_agent(agent_id), _noop)


async def _noop() -> None:
    pass


# -- registry -----------------------------------------------------------------------------------------------


async def test_register_emits_agent_created_and_lists_the_agent(
    agents: AgentRegistry, ctx: Context, recorder: Recorder
) -> None:
    seen_registered: list[bool] = []
    agent = _agent("a1")

    def on_created(created: Agent) -> None:
        seen_registered.append(agents.get(created.id) is created)
        recorder.listener("created")(created)

    ctx.on(ev.AGENT_CREATED, on_created)
    agents.register(agent)

    assert recorder.calls == [("created", (agent,))]
    assert seen_registered == [True]
    assert agents.get("a1") is agent
    assert agents.list() == [agent]


async def test_duplicate_agent_id_is_rejected(agents: AgentRegistry, ctx: Context, recorder: Recorder) -> None:
    first = _agent("a1")
    agents.register(first)
    ctx.on(ev.AGENT_CREATED, recorder.listener("created"))

    with pytest.raises(ValueError, match="already exists"):
        agents.register(_agent("a1"))

    assert agents.get("a1") is first
    assert recorder.calls == []


async def test_throwing_created_listener_rolls_back_and_propagates(agents: AgentRegistry, ctx: Context) -> None:
    def fails(agent: Agent) -> None:
        raise RuntimeError("listener failed")

    remove = ctx.on(ev.AGENT_CREATED, fails)
    with pytest.raises(RuntimeError, match="listener failed"):
        agents.register(_agent("a1"))
    assert agents.get("a1") is None
    assert agents.list() == []

    await remove()
    agent = _agent("a1")
    agents.register(agent)  # the id is free again
    assert agents.get("a1") is agent


async def test_unregister_emits_agent_disposed_once(agents: AgentRegistry, ctx: Context, recorder: Recorder) -> None:
    agent = _agent("a1")
    ctx.on(ev.AGENT_DISPOSED, recorder.listener("disposed"))
    unregister = agents.register(agent)

    await unregister()
    await unregister()

    assert recorder.calls == [("disposed", (agent,))]
    assert agents.get("a1") is None


async def test_throwing_disposed_listener_is_logged_not_raised(agents: AgentRegistry, ctx: Context) -> None:
    def fails(agent: Agent) -> None:
        raise RuntimeError("disposed listener failed")

    ctx.on(ev.AGENT_DISPOSED, fails)
    unregister = agents.register(_agent("a1"))

    with capture_logs() as logs:
        await unregister()

    assert agents.get("a1") is None
    failures = [entry for entry in logs if entry["event"] == "agent/disposed listener failed"]
    assert len(failures) == 1
    assert failures[0]["agent_id"] == "a1"
    assert failures[0]["log_level"] == "error"


async def test_agent_registered_by_a_plugin_is_unregistered_with_it(
    agents: AgentRegistry, ctx: Context, recorder: Recorder
) -> None:
    agent = _agent("owned")
    ctx.on(ev.AGENT_DISPOSED, recorder.listener("disposed"))

    @plugin("owner", inject=("agents",))
    def owner(pctx: Context, config: object) -> None:
        pctx.agents.register(agent)

    dispose = ctx.plugin(owner)
    assert agents.get("owned") is agent
    await dispose()
    assert agents.get("owned") is None
    assert recorder.calls == [("disposed", (agent,))]


# -- factory seam -------------------------------------------------------------------------------------------


async def test_create_and_resume_without_factory_raise(agents: AgentRegistry) -> None:
    with pytest.raises(NoAgentFactoryError, match="no agent factory registered"):
        await agents.create(agent_id="a", session_id="s")
    with pytest.raises(NoAgentFactoryError, match="no agent factory registered"):
        await agents.resume(agent_id="a", resume_session_id="s")


async def test_create_and_resume_delegate_to_the_factory(agents: AgentRegistry) -> None:
    factory = FakeFactory()
    agents.set_factory(factory)
    options = AgentOptions(model="echo")

    created = await agents.create(agent_id="a", session_id="s", meta={"cwd": "/"}, agent_options=options)
    resumed = await agents.resume(agent_id="b", resume_session_id="s0")

    assert created.agent.id == "a"
    assert resumed.agent.id == "b"
    assert factory.calls == [
        ("create", {"agent_id": "a", "session_id": "s", "meta": {"cwd": "/"}, "agent_options": options}),
        ("resume", {"agent_id": "b", "resume_session_id": "s0", "agent_options": None}),
    ]


async def test_second_factory_is_rejected(agents: AgentRegistry) -> None:
    first = FakeFactory()
    agents.set_factory(first)
    with pytest.raises(RuntimeError, match="already registered"):
        agents.set_factory(FakeFactory())
    await agents.create(agent_id="a", session_id="s")
    assert len(first.calls) == 1


async def test_factory_disposer_clears_it_and_allows_another(agents: AgentRegistry) -> None:
    clear = agents.set_factory(FakeFactory())
    await clear()
    with pytest.raises(NoAgentFactoryError):
        await agents.create(agent_id="a", session_id="s")
    second = FakeFactory()
    agents.set_factory(second)
    await clear()  # idempotent: does not clear the second factory
    await agents.create(agent_id="a", session_id="s")
    assert len(second.calls) == 1


async def test_factory_is_cleared_when_its_scope_is_disposed(agents: AgentRegistry, ctx: Context) -> None:
    @plugin("loop", inject=("agents",))
    def loop(pctx: Context, config: object) -> None:
        pctx.agents.set_factory(FakeFactory())

    dispose = ctx.plugin(loop)
    await agents.create(agent_id="a", session_id="s")
    await dispose()
    with pytest.raises(NoAgentFactoryError):
        await agents.create(agent_id="b", session_id="s")


# -- AgentHandle --------------------------------------------------------------------------------------------


async def test_handle_dispose_is_memoized_across_concurrent_callers() -> None:
    started, release = anyio.Event(), anyio.Event()
    runs: list[str] = []
    returned: list[int] = []

    async def dispose() -> None:
        runs.append("dispose")
        started.set()
        await release.wait()
        runs.append("done")

    handle = AgentHandle(_agent("a"), dispose)

    async def caller(index: int) -> None:
        await handle.dispose()
        returned.append(index)

    with anyio.fail_after(1):
        async with anyio.create_task_group() as group:
            for index in range(3):
                group.start_soon(caller, index)
            await started.wait()
            for _ in range(5):
                await anyio.lowlevel.checkpoint()
            assert returned == []  # nobody returns before the teardown has finished
            release.set()

    assert runs == ["dispose", "done"]
    assert sorted(returned) == [0, 1, 2]

    await handle.dispose()  # later callers return at once without running it again
    assert runs == ["dispose", "done"]
