"""Creating agents through ``ctx.agents`` and resuming them from persistence (reference §6.2-§6.4).

A "restart" is two ``App`` lifetimes sharing one :class:`MemoryStore`: only what was flushed survives.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

import anyio
import pytest

from dsh import events as ev
from dsh.app import load_core
from dsh.kernel import App, Context
from dsh.loop._agent import ReactLoopAgent
from dsh.plugins.memory_persistence import MemoryStore, memory_persistence_plugin
from dsh.services.agents import AgentHandle, AgentOptions
from dsh.services.llm import ContentBlock, Message, MessageSource
from dsh.services.sessions import Session, SessionEvent
from dsh.services.tools import ToolDefinition, ToolExecution

ECHO = AgentOptions(model="echo")


def text(value: str) -> list[ContentBlock]:
    return [{"type": "text", "text": value}]


def turns_of(session: Session) -> list[int]:
    return [event.data["turn"] for event in session.events if event.type == "turn/start"]


def assert_contiguous(events: list[SessionEvent] | tuple[SessionEvent, ...]) -> None:
    assert [event.seq for event in events] == list(range(len(events)))


async def prompt(agent: ReactLoopAgent, value: str) -> None:
    agent.send(text(value))
    with anyio.fail_after(5):
        await agent.when_idle()


class WatchedEvents(list[SessionEvent]):
    """A store's committed-event list that lets a test await a given length (a flush it did not start)."""

    def __init__(self) -> None:
        super().__init__()
        self._waiters: list[anyio.Event] = []

    def append(self, item: SessionEvent) -> None:
        super().append(item)
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            waiter.set()

    async def wait_for_length(self, length: int) -> None:
        with anyio.fail_after(5):
            while len(self) < length:
                waiter = anyio.Event()
                self._waiters.append(waiter)
                await waiter.wait()


@asynccontextmanager
async def lifetime(store: MemoryStore | None) -> AsyncIterator[Context]:
    """One process lifetime: the core plugins, plus in-memory persistence on *store* when given."""
    async with App() as application:
        ctx = application.ctx
        load_core(ctx)
        if store is not None:
            ctx.plugin(memory_persistence_plugin, store)
        yield ctx


def agent_of(handle: AgentHandle) -> ReactLoopAgent:
    return cast(ReactLoopAgent, handle.agent)


# -- create through ctx.agents ------------------------------------------------------------------------------


async def test_create_uses_the_callers_session_id_and_records_meta(core: Context) -> None:
    announced: list[Session] = []
    core.on(ev.SESSION_CREATED, announced.append)
    handle = await core.agents.create(
        agent_id="acp-1",
        session_id="acp-session-1",
        meta={"cwd": "/work/project", "parent_session": "root"},
        agent_options=ECHO,
    )
    agent = agent_of(handle)
    assert agent.id == "acp-1"
    assert agent.session.id == "acp-session-1"
    assert agent.session.header.cwd == "/work/project"
    assert agent.session.header.parent_session == "root"
    assert announced == [agent.session]
    assert core.sessions.get("acp-session-1") is agent.session
    assert core.agents.get("acp-1") is agent
    await prompt(agent, "hello")
    assert turns_of(agent.session) == [1]
    with anyio.fail_after(5):
        await handle.dispose()
    assert core.sessions.get("acp-session-1") is None
    assert core.agents.get("acp-1") is None


async def test_create_without_meta_has_no_cwd(core: Context) -> None:
    handle = await core.agents.create(agent_id="a", session_id="plain", agent_options=ECHO)
    assert agent_of(handle).session.header.cwd is None
    assert agent_of(handle).session.header.parent_session is None
    await handle.dispose()


async def test_duplicate_agent_id_is_rejected_before_the_session_is_created(
    core: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = await core.agents.create(agent_id="dup", session_id="s1", agent_options=ECHO)
    prepared: list[str | None] = []
    announced: list[Session] = []
    real_prepare = core.sessions.prepare

    def spy(id: str | None = None, **kwargs: Any) -> Session:
        prepared.append(id)
        return real_prepare(id, **kwargs)

    monkeypatch.setattr(core.sessions, "prepare", spy)
    core.on(ev.SESSION_CREATED, announced.append)
    with pytest.raises(ValueError, match="dup"):
        await core.agents.create(agent_id="dup", session_id="s2", agent_options=ECHO)
    assert prepared == []
    assert announced == []
    assert core.sessions.get("s2") is None
    assert [s.id for s in core.sessions.list()] == ["s1"]
    assert core.agents.get("dup") is first.agent
    await prompt(agent_of(first), "still works")


# -- resume -------------------------------------------------------------------------------------------------


async def test_resume_without_persistence_rejects_clearly(core: Context) -> None:
    assert core.get("session_persistence") is None
    with pytest.raises(RuntimeError, match=r"cannot resume: session persistence is not configured"):
        await core.agents.resume(agent_id="a", resume_session_id="anything", agent_options=ECHO)
    assert core.agents.get("a") is None
    assert core.sessions.list() == []


async def test_resume_of_an_unknown_session_rejects_and_leaves_nothing_behind() -> None:
    async with lifetime(MemoryStore()) as ctx:
        with pytest.raises(KeyError, match="nowhere"):
            await ctx.agents.resume(agent_id="a", resume_session_id="nowhere", agent_options=ECHO)
        assert ctx.agents.get("a") is None
        assert ctx.sessions.list() == []
        handle = await ctx.agents.create(agent_id="a", session_id="fresh", agent_options=ECHO)
        await prompt(agent_of(handle), "the id is free again")


async def test_resume_with_a_taken_agent_id_is_rejected_before_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryStore()
    async with lifetime(store) as ctx:
        handle = await ctx.agents.create(agent_id="a", session_id="stored", agent_options=ECHO)
        await prompt(agent_of(handle), "hello")
        loads: list[str] = []
        persistence = ctx.session_persistence
        real_load = persistence.load

        async def spy(session_id: str) -> Any:
            loads.append(session_id)
            return await real_load(session_id)

        monkeypatch.setattr(persistence, "load", spy)
        with pytest.raises(ValueError, match="already exists"):
            await ctx.agents.resume(agent_id="a", resume_session_id="stored", agent_options=ECHO)
        assert loads == []


async def test_resume_rechecks_the_agent_id_after_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryStore()
    async with lifetime(store) as ctx:
        handle = await ctx.agents.create(agent_id="writer", session_id="stored", agent_options=ECHO)
        await prompt(agent_of(handle), "hello")
        await handle.dispose()
        persistence = ctx.session_persistence
        real_load = persistence.load
        raced: list[ReactLoopAgent] = []

        async def racing_load(session_id: str) -> Any:
            loaded = await real_load(session_id)
            raced.append(ctx.agent_loop.create("a", ECHO))  # someone takes the id while we await
            return loaded

        prepared: list[Any] = []
        real_prepare = ctx.sessions.prepare

        def spy(*args: Any, **kwargs: Any) -> Session:
            prepared.append(args)
            return real_prepare(*args, **kwargs)

        announced: list[Session] = []
        ctx.on(ev.SESSION_CREATED, announced.append)
        monkeypatch.setattr(persistence, "load", racing_load)
        monkeypatch.setattr(ctx.sessions, "prepare", spy)
        with pytest.raises(ValueError, match="already exists"):
            await ctx.agents.resume(agent_id="a", resume_session_id="stored", agent_options=ECHO)
        assert "stored" not in [args[0] for args in prepared]
        assert ctx.sessions.get("stored") is None
        assert [s.id for s in announced] == [raced[0].session.id]  # the racer's, never "stored"
        assert ctx.agents.get("a") is raced[0]


async def _ok_tool(arguments: Any, execution: ToolExecution) -> str:
    return f"looked up {arguments}"


async def test_resume_across_two_lifetimes_continues_history_turns_and_seqs() -> None:
    store = MemoryStore()
    meta = {"cwd": "/work/project", "parent_session": "root-session"}
    async with lifetime(store) as ctx:
        ctx.tools.register(ToolDefinition("lookup", "look something up", {"type": "object"}, _ok_tool))
        ctx.scripted_models.add(
            "first",
            [{"reasoning": "think", "tool_calls": [{"name": "lookup", "arguments": {"q": 1}}]}, {"text": "found"}],
        )
        handle = await ctx.agents.create(
            agent_id="a", session_id="s1", meta=meta, agent_options=AgentOptions(model="scripted:first")
        )
        first = agent_of(handle)
        await prompt(first, "look it up")
        history_before = first.session.derive_messages()
        events_before = first.session.events
        created_at = first.session.header.created_at
        with anyio.fail_after(5):
            await handle.dispose()
    assert list(store.events["s1"]) == list(events_before)  # everything was flushed at turn end

    async with lifetime(store) as ctx:
        handle = await ctx.agents.resume(agent_id="a", resume_session_id="s1", agent_options=ECHO)
        second = agent_of(handle)
        assert second.session.id == "s1"
        assert second.session.header.cwd == "/work/project"
        assert second.session.header.parent_session == "root-session"
        assert second.session.header.created_at == created_at
        assert second.session.events == events_before
        assert second.session.derive_messages() == history_before
        await prompt(second, "and again")
        assert turns_of(second.session) == [1, 2]
        assert_contiguous(second.session.events)
        assert second.session.derive_messages()[: len(history_before)] == history_before
        with anyio.fail_after(5):
            await handle.dispose()
    stored = store.events["s1"]
    assert_contiguous(stored)
    assert [event.seq for event in stored] == [event.seq for event in second.session.events]
    assert len({event.seq for event in stored}) == len(stored)
    assert [event.data["turn"] for event in stored if event.type == "turn/start"] == [1, 2]


async def test_an_idle_inject_is_flushed_on_its_own_and_survives_resume() -> None:
    store = MemoryStore()
    watched = WatchedEvents()
    store.events["s1"] = watched
    note: MessageSource = {"kind": "plugin", "plugin": "notes"}
    async with lifetime(store) as ctx:
        handle = await ctx.agents.create(agent_id="a", session_id="s1", agent_options=ECHO)
        agent = agent_of(handle)
        agent.inject(text("remember this"), note)
        assert [e.type for e in agent.session.events] == ["turn/start", "context/message", "turn/end"]
        await watched.wait_for_length(3)  # flushed with no turn of the loop and no help from the test
        with anyio.fail_after(5):
            await handle.dispose()
    assert [e.type for e in store.events["s1"]] == ["turn/start", "context/message", "turn/end"]
    assert store.events["s1"][0].data["trigger"] == {"kind": "injection", "source": note}

    async with lifetime(store) as ctx:
        handle = await ctx.agents.resume(agent_id="a", resume_session_id="s1", agent_options=ECHO)
        agent = agent_of(handle)
        context: Message = {
            "role": "user",
            "content": [
                {"type": "text", "text": '<context source="plugin">'},
                *text("remember this"),
                {"type": "text", "text": "</context>"},
            ],
        }
        assert agent.session.derive_messages() == [context]
        await prompt(agent, "what did I say?")
        assert turns_of(agent.session) == [1, 2]
        assert agent.session.derive_messages()[:2] == [context, {"role": "user", "content": text("what did I say?")}]
        assert_contiguous(agent.session.events)
        await handle.dispose()


# -- derived history replays identically --------------------------------------------------------------------


async def test_derived_history_replays_identically_from_the_log(core: Context) -> None:
    core.tools.register(ToolDefinition("lookup", "look something up", {"type": "object"}, _ok_tool))

    async def failing(arguments: Any, execution: ToolExecution) -> str:
        raise RuntimeError("no such thing")

    core.tools.register(ToolDefinition("broken", "always fails", {"type": "object"}, failing))
    core.scripted_models.add(
        "rich",
        [
            {"reasoning": "plan", "text": "calling", "tool_calls": [{"name": "lookup", "arguments": {"q": "x"}}]},
            {"tool_calls": [{"name": "broken", "arguments": "not json"}]},
            {"text": "summary"},
            {"text": "cut", "finish": "max-tokens"},
        ],
    )
    agent: ReactLoopAgent = core.agent_loop.create("a", AgentOptions(model="scripted:rich"))
    fired = False

    def step_start(target: ReactLoopAgent, turn: int, step: int) -> None:
        nonlocal fired
        if not fired:
            fired = True
            target.steer(text("be quick"), {"kind": "agent", "agent_id": "boss"})
            target.inject(text("context inside the turn"))

    core.on(ev.AGENT_STEP_START, step_start)
    await prompt(agent, "first question")
    agent.inject(text("idle note"), {"kind": "plugin", "plugin": "memo"})
    await prompt(agent, "second question")
    kinds = {event.type for event in agent.session.events}
    assert {"steering/message", "context/message", "tool/result", "assistant/message"} <= kinds
    live = agent.session.derive_messages()

    seeded = core.sessions.prepare("replay", seed=agent.session.events)
    assert seeded.derive_messages() == live
    round_tripped = [SessionEvent.from_json(event.to_json()) for event in agent.session.events]
    assert core.sessions.prepare("replay-json", seed=round_tripped).derive_messages() == live
    # derivation is a pure function of the log: asking twice, or after an attempt to mutate what it gave
    # (the shared messages are read-only since issue #12) or after its list is changed, changes nothing
    copy = seeded.derive_messages()
    with pytest.raises(TypeError, match="read-only"):
        copy[0]["content"].clear()
    copy.clear()
    assert seeded.derive_messages() == live
