"""Property tests of batching and message conservation (reference §5, the original's properties.spec).

Each example builds its own small application (hypothesis and function-scoped fixtures do not mix) and runs in
milliseconds. In-flight windows come from a model that yields to the event loop between chunks, so a schedule's
pauses land sends, steers and cancels mid-stream without any wall-clock sleep.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

import anyio
import anyio.lowlevel
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh import events as ev
from dsh.app import load_core
from dsh.kernel import App, Context
from dsh.loop._agent import ReactLoopAgent
from dsh.services.agents import AgentOptions
from dsh.services.llm import ContentBlock, GenerateRequest, StreamChunk
from dsh.services.sessions import Session

SETTINGS = settings(max_examples=40, deadline=None, database=None)


def text(value: str) -> list[ContentBlock]:
    return [{"type": "text", "text": value}]


def only_text(content: list[ContentBlock]) -> str:
    assert len(content) == 1
    block = content[0]
    assert block["type"] == "text"
    return block["text"]


async def yielding_echo(request: GenerateRequest) -> AsyncIterator[StreamChunk]:
    """Echo the last user message, then a few filler chunks, yielding to the event loop before every chunk."""
    pieces: list[str] = []
    for message in reversed(request.messages):
        if message["role"] == "user":
            pieces = [b["text"] for b in message["content"] if b["type"] == "text"]
            break
    for piece in [*pieces, *[" ."] * 8]:
        await anyio.lowlevel.checkpoint()
        yield {"type": "text-delta", "text": piece}
    await anyio.lowlevel.checkpoint()
    yield {"type": "finish", "reason": {"kind": "stop"}}


@dataclass
class Harness:
    ctx: Context
    agent: ReactLoopAgent
    statuses: list[str] = field(default_factory=list)


def start(ctx: Context, model: str) -> Harness:
    load_core(ctx)
    ctx.llm.register_adapter(["yielding"], yielding_echo)
    agent: ReactLoopAgent = ctx.agent_loop.create("p", AgentOptions(model=model))
    harness = Harness(ctx, agent)
    ctx.on(ev.AGENT_STATUS, lambda target, status: harness.statuses.append(status) if target is agent else None)
    return harness


def assert_enclosed(session: Session) -> None:
    """Each ``turn/start`` has exactly one ``turn/end``; nothing lives outside a turn; turns strictly increase."""
    open_turn: int | None = None
    last_turn = 0
    for event in session.events:
        if event.type == "turn/start":
            assert open_turn is None, f"turn/start #{event.seq} inside turn {open_turn}"
            open_turn = event.data["turn"]
            assert open_turn is not None and open_turn > last_turn, "turn numbers must strictly increase"
            last_turn = open_turn
        elif event.type == "turn/end":
            assert event.data["turn"] == open_turn, f"turn/end #{event.seq} closes no open turn"
            open_turn = None
        else:
            assert open_turn is not None, f"{event.type} #{event.seq} outside any turn"
    assert open_turn is None


def assert_status_trace(statuses: Sequence[str]) -> None:
    """running first, then strictly alternating idle/running, never the same twice, ending idle."""
    if not statuses:
        return
    assert statuses[0] == "running"
    for previous, current in itertools.pairwise(statuses):
        assert previous != current, f"{current} twice in a row: {statuses}"
        assert {previous, current} == {"idle", "running"}
    assert statuses[-1] == "idle"


async def settle(agent: ReactLoopAgent) -> None:
    with anyio.fail_after(5):
        await agent.when_idle()


# -- a synchronous burst is one turn --------------------------------------------------------------------------


@SETTINGS
@given(count=st.integers(min_value=1, max_value=12))
async def test_a_synchronous_burst_makes_exactly_one_turn(count: int) -> None:
    async with App() as application:
        harness = start(application.ctx, "echo")
        agent = harness.agent
        sent = [f"burst {i}" for i in range(count)]
        for value in sent:
            agent.send(text(value))
        await settle(agent)
        starts = [e for e in agent.session.events if e.type == "turn/start"]
        assert [e.data["turn"] for e in starts] == [1]
        users = [only_text(e.data["content"]) for e in agent.session.events if e.type == "user/message"]
        assert users == sent
        assert harness.statuses == ["running", "idle"]
        assert_enclosed(agent.session)


@SETTINGS
@given(count=st.integers(min_value=1, max_value=8))
async def test_sequential_sends_make_turns_one_to_n(count: int) -> None:
    async with App() as application:
        harness = start(application.ctx, "echo")
        agent = harness.agent
        for i in range(count):
            agent.send(text(f"prompt {i}"))
            await settle(agent)
        starts = [e.data["turn"] for e in agent.session.events if e.type == "turn/start"]
        assert starts == list(range(1, count + 1))
        ends = [e.data["reason"] for e in agent.session.events if e.type == "turn/end"]
        assert ends == [{"kind": "completed"}] * count
        assert harness.statuses == ["running", "idle"] * count
        assert_enclosed(agent.session)


# -- random schedules never lose a message ------------------------------------------------------------------

Op = tuple[str, int]
"""An operation and the number of event-loop checkpoints the test yields after it."""

OPS = st.tuples(
    st.sampled_from(["send", "send", "steer", "steer", "steer", "cancel", "cancel", "idle"]),
    st.integers(min_value=0, max_value=4),
)


@SETTINGS
@given(schedule=st.lists(OPS, min_size=1, max_size=25), model=st.sampled_from(["yielding", "echo"]))
async def test_random_schedules_never_lose_a_message(schedule: list[Op], model: str) -> None:
    async with App() as application:
        harness = start(application.ctx, model)
        agent = harness.agent
        sent: list[str] = []
        # message -> log length at the first cancel() after it was sent (None: never cancelled)
        cancelled_at: dict[str, int | None] = {}
        for index, (op, pause) in enumerate(schedule):
            if op in ("send", "steer"):
                value = f"m{index}"
                sent.append(value)
                cancelled_at[value] = None
                (agent.send if op == "send" else agent.steer)(text(value))
            elif op == "cancel":
                mark = len(agent.session.events)
                for value, at in cancelled_at.items():
                    if at is None:
                        cancelled_at[value] = mark
                agent.cancel()
            else:
                await settle(agent)
            for _ in range(pause):
                await anyio.lowlevel.checkpoint()
        await settle(agent)

        assert agent.status == "idle"
        assert not agent.inbox.has_queued
        assert not agent.inbox.has_steering
        delivered: dict[str, list[int]] = {}
        for event in agent.session.events:
            if event.type in ("user/message", "steering/message"):
                delivered.setdefault(only_text(event.data["content"]), []).append(event.seq)
        assert set(delivered) <= set(sent)
        for value in sent:
            seqs = delivered.get(value, [])
            assert len(seqs) <= 1, f"{value} delivered twice"
            mark = cancelled_at[value]
            if mark is None:
                assert len(seqs) == 1, f"{value} was lost although never cancelled"
            elif seqs:
                assert seqs[0] < mark, f"{value} was delivered after the cancel() that dropped it"
        assert_enclosed(agent.session)
        assert_status_trace(harness.statuses)
        if agent.session.events:
            assert agent.session.events[-1].type == "turn/end"
