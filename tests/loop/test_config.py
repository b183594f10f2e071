"""Configured agents (reference §6.4, §10; the original's config-session-id spec).

``agent_loop.agents`` entries are created at start-up on a fresh ``{id}-session-<uuid4>`` session, or resumed
from ``resume_session_id`` once a ``session_persistence`` service exists; a failed resume is a warning.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

import anyio
import anyio.lowlevel
import pydantic
import pytest
from structlog.testing import capture_logs

from dsh import events as ev
from dsh.app import load_core
from dsh.kernel import App, Context
from dsh.loop._agent import ReactLoopAgent
from dsh.plugins.memory_persistence import MemoryStore, memory_persistence_plugin
from dsh.services.agents import Agent, AgentOptions
from dsh.services.llm import ContentBlock, GenerateRequest
from dsh.services.sessions import LoadedSession, Session

SESSION_ID = re.compile(r"^(?P<id>.+)-session-(?P<uuid>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$")


def text(value: str) -> list[ContentBlock]:
    return [{"type": "text", "text": value}]


async def prompt(agent: ReactLoopAgent, value: str) -> None:
    agent.send(text(value))
    with anyio.fail_after(5):
        await agent.when_idle()


def turns_of(session: Session) -> list[int]:
    return [event.data["turn"] for event in session.events if event.type == "turn/start"]


@asynccontextmanager
async def configured(agents: list[dict[str, Any]]) -> AsyncIterator[Context]:
    async with App() as application:
        load_core(application.ctx, agent_loop={"agents": agents})
        yield application.ctx


def loop_agent(ctx: Context, agent_id: str) -> ReactLoopAgent:
    agent = ctx.agents.get(agent_id)
    assert agent is not None, f"no agent {agent_id!r}"
    return cast(ReactLoopAgent, agent)


async def store_a_session(store: MemoryStore, session_id: str) -> None:
    """A first lifetime that leaves one completed turn of *session_id* in *store*."""
    async with App() as application:
        ctx = application.ctx
        load_core(ctx)
        ctx.plugin(memory_persistence_plugin, store)
        handle = await ctx.agents.create(agent_id="writer", session_id=session_id, agent_options=AgentOptions("echo"))
        await prompt(cast(ReactLoopAgent, handle.agent), "remember me")
        await handle.dispose()
    assert [e.type for e in store.events[session_id]][-1] == "turn/end"


# -- auto-created agents --------------------------------------------------------------------------------------


async def _one_configured_run() -> str:
    """Start an application with two configured agents, check them, run a prompt; return main's session id."""
    async with configured(
        [{"id": "main", "model": "echo", "system_prompt": "Be brief."}, {"id": "helper", "model": "echo"}]
    ) as ctx:
        main, helper = loop_agent(ctx, "main"), loop_agent(ctx, "helper")
        for agent in (main, helper):
            match = SESSION_ID.match(agent.session.id)
            assert match is not None, agent.session.id
            assert match["id"] == agent.id
            assert uuid.UUID(match["uuid"]).version == 4
            assert agent.session.header.cwd is None
            assert ctx.sessions.get(agent.session.id) is agent.session
        assert main.options == AgentOptions(model="echo", system_prompt="Be brief.")
        assert helper.options == AgentOptions(model="echo")
        assert main.session.id != helper.session.id

        requests: list[GenerateRequest] = []

        async def record(agent: Agent, turn: int, step: int, request: GenerateRequest, next: Any) -> Any:
            requests.append(request)
            return await next()

        ctx.on(ev.AGENT_REQUEST, record)
        await prompt(main, "hello")
        assert requests[0].system is not None and requests[0].system.endswith("Be brief.")
        assert [e.data["reason"] for e in main.session.events if e.type == "turn/end"] == [{"kind": "completed"}]
    assert main.status == "disposed"  # owned by the loop plugin: disposed with the application
    return main.session.id


async def test_config_agents_are_created_at_start_up_on_fresh_uuid_sessions() -> None:
    first, second = await _one_configured_run(), await _one_configured_run()
    assert first != second  # a new uuid every run


async def test_no_config_means_no_agents(core: Context) -> None:
    assert core.agents.list() == []
    assert core.sessions.list() == []


@pytest.mark.parametrize(
    "agents",
    [[{"model": "echo"}], [{"id": "", "model": "echo"}], [{"id": "main", "modle": "echo"}]],
    ids=["missing-id", "empty-id", "unknown-key"],
)
async def test_invalid_agent_config_is_rejected(app: App, agents: list[dict[str, Any]]) -> None:
    with pytest.raises(pydantic.ValidationError):
        load_core(app.ctx, agent_loop={"agents": agents})


# -- resume_session_id ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("persistence", ["loaded after the loop", "loaded before the loop"])
async def test_config_resume_continues_a_stored_session(persistence: str) -> None:
    store = MemoryStore()
    await store_a_session(store, "stored-1")
    stored = list(store.events["stored-1"])
    async with App() as application:
        ctx = application.ctx
        created = anyio.Event()
        ctx.on(ev.AGENT_CREATED, lambda agent: created.set() if agent.id == "main" else None)
        config = {"agents": [{"id": "main", "model": "echo", "resume_session_id": "stored-1"}]}
        if persistence == "loaded before the loop":
            ctx.plugin(memory_persistence_plugin, store)
            load_core(ctx, agent_loop=config)
        else:
            load_core(ctx, agent_loop=config)
            assert ctx.agents.get("main") is None  # waits for a session_persistence service
            ctx.plugin(memory_persistence_plugin, store)
        with anyio.fail_after(5):
            await created.wait()
        agent = loop_agent(ctx, "main")
        assert agent.session.id == "stored-1"
        assert list(agent.session.events) == stored
        await prompt(agent, "do you remember?")
        assert turns_of(agent.session) == [1, 2]
        assert [e.seq for e in agent.session.events] == list(range(len(agent.session.events)))
    assert [e.data["turn"] for e in store.events["stored-1"] if e.type == "turn/start"] == [1, 2]


async def test_a_failed_config_resume_is_a_warning_not_a_crash() -> None:
    store = MemoryStore()
    async with App() as application:
        ctx = application.ctx
        with capture_logs() as logs:
            load_core(ctx, agent_loop={"agents": [{"id": "main", "model": "echo", "resume_session_id": "missing"}]})
            ctx.plugin(memory_persistence_plugin, store)
            persistence = ctx.session_persistence
            real_load = persistence.load
            attempted = anyio.Event()

            async def observed_load(session_id: str) -> LoadedSession:
                try:
                    return await real_load(session_id)
                finally:
                    attempted.set()

            persistence.load = observed_load  # the resume task has been spawned but has not run yet
            with anyio.fail_after(5):
                await attempted.wait()
                await anyio.lowlevel.checkpoint()
        warnings = [entry for entry in logs if entry["log_level"] == "warning"]
        assert len(warnings) == 1
        assert warnings[0]["agent_id"] == "main"
        assert "missing" in warnings[0]["error"]
        assert ctx.agents.get("main") is None
        assert ctx.sessions.list() == []
        # nothing crashed: the application still creates and runs agents, even under the same id
        agent: ReactLoopAgent = ctx.agent_loop.create("main", AgentOptions(model="echo"))
        await prompt(agent, "still here")
        assert turns_of(agent.session) == [1]


# -- agent_loop.create ----------------------------------------------------------------------------------------


async def test_a_taken_agent_id_is_rejected_before_the_session_store_is_touched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with configured([{"id": "main", "model": "echo"}]) as ctx:
        existing = loop_agent(ctx, "main")
        prepared: list[Any] = []
        announced: list[Session] = []
        real_prepare = ctx.sessions.prepare

        def spy(*args: Any, **kwargs: Any) -> Session:
            prepared.append(args)
            return real_prepare(*args, **kwargs)

        monkeypatch.setattr(ctx.sessions, "prepare", spy)
        ctx.on(ev.SESSION_CREATED, announced.append)
        with pytest.raises(ValueError, match="main"):
            ctx.agent_loop.create("main", AgentOptions(model="echo"))
        assert prepared == []
        assert announced == []
        assert [s.id for s in ctx.sessions.list()] == [existing.session.id]
        assert ctx.agents.get("main") is existing
        other: ReactLoopAgent = ctx.agent_loop.create("other", AgentOptions(model="echo"))
        assert len(prepared) == 1
        assert SESSION_ID.match(other.session.id) is not None
        await prompt(existing, "unaffected")
