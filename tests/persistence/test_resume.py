"""Resume through ``ctx.agents.resume`` on the JSONL backend, across App lifetimes and crashes (reference §6.4)."""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import anyio
import pytest

from dsh.errors import error_code
from dsh.loop._agent import ReactLoopAgent
from dsh.plugins.persistence import JsonlPersistence, SessionLockedError, SessionNotFoundError
from dsh.plugins.persistence._format import scan
from dsh.services.agents import AgentHandle, AgentOptions
from dsh.services.sessions import Session, SessionEvent
from dsh.services.tools import ToolDefinition, ToolExecution

from ._helpers import (
    INTERRUPTED_TEXT,
    assert_balanced,
    closed_turn,
    events_of,
    fds_open_to,
    file_bytes,
    header,
    lifetime,
    load_in_other_process,
    lock_is_free,
    open_turn,
    released,
    text,
    tree,
)

ECHO = AgentOptions(model="echo")


def agent_of(handle: AgentHandle) -> ReactLoopAgent:
    return cast(ReactLoopAgent, handle.agent)


def turns_of(events: Sequence[SessionEvent]) -> list[int]:
    return [event.data["turn"] for event in events if event.type == "turn/start"]


async def prompt(agent: ReactLoopAgent, value: str) -> None:
    agent.send(text(value))
    with anyio.fail_after(5):
        await agent.when_idle()


def stored(path: Path) -> list[SessionEvent]:
    """The events in a session file, as ``scan`` reads them (no repair expected)."""
    result = scan(path.read_bytes(), str(path))
    assert result.closers == []
    return result.events


async def _lookup(arguments: Any, execution: ToolExecution) -> str:
    return f"looked up {arguments}"


async def test_resume_across_two_lifetimes_continues_turns_seqs_and_history(tmp_path: Path) -> None:
    data = tmp_path / "data"
    path = data / "s1.jsonl"
    async with lifetime(data) as ctx:
        ctx.tools.register(ToolDefinition("lookup", "look something up", {"type": "object"}, _lookup))
        ctx.scripted_models.add(
            "first",
            [
                {"reasoning": "think", "text": "calling", "tool_calls": [{"name": "lookup", "arguments": {"q": 1}}]},
                {"text": "found"},
            ],
        )
        handle = await ctx.agents.create(
            agent_id="a",
            session_id="s1",
            meta={"cwd": "/work/project", "parent_session": "root"},
            agent_options=AgentOptions(model="scripted:first"),
        )
        first = agent_of(handle)
        await prompt(first, "look it up")
        history = first.session.derive_messages()
        events_before = first.session.events
        created_at = first.session.header.created_at
        with anyio.fail_after(5):
            await handle.dispose()
    assert released(stored(path)) == released(events_before)

    async with lifetime(data) as ctx:
        handle = await ctx.agents.resume(agent_id="a", resume_session_id="s1", agent_options=ECHO)
        second = agent_of(handle)
        assert second.session.id == "s1"
        assert second.session.header.cwd == "/work/project"
        assert second.session.header.parent_session == "root"
        assert second.session.header.created_at == created_at
        assert released(second.session.events) == released(events_before)
        assert second.session.derive_messages() == history
        await prompt(second, "and again")
        assert turns_of(second.session.events) == [1, 2]
        assert second.session.derive_messages()[: len(history)] == history
        final = second.session.events
        with anyio.fail_after(5):
            await handle.dispose()

    on_disk = stored(path)
    assert released(on_disk) == released(final)
    assert [event.seq for event in on_disk] == list(range(len(on_disk)))  # contiguous, no duplicates
    assert turns_of(on_disk) == [1, 2]
    assert path.read_bytes().count(b'"seq":0,') == 1
    assert_balanced(on_disk)

    async with lifetime(data) as ctx:  # and a third time: still the same history
        handle = await ctx.agents.resume(agent_id="b", resume_session_id="s1", agent_options=ECHO)
        assert agent_of(handle).session.derive_messages() == Session(second.session.header, on_disk).derive_messages()
        await prompt(agent_of(handle), "third")
        assert turns_of(agent_of(handle).session.events) == [1, 2, 3]
    assert turns_of(stored(path)) == [1, 2, 3]


async def test_resume_of_a_crashed_session_closes_its_last_turn_interrupted(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    path = data / "crashed.jsonl"
    crashed = events_of(*closed_turn(1, "before"), *open_turn(2, "call_x"))
    path.write_bytes(file_bytes(header("crashed", cwd="/work"), crashed) + b'{"type":"assistant/ch')
    async with lifetime(data) as ctx:
        handle = await ctx.agents.resume(agent_id="a", resume_session_id="crashed", agent_options=ECHO)
        agent = agent_of(handle)
        events = agent.session.events
        assert list(events[: len(crashed)]) == crashed
        closers = [(e.type, e.seq, e.data) for e in events[len(crashed) :]]
        n = len(crashed)
        assert closers == [
            (
                "tool/result",
                n,
                {
                    "turn": 2,
                    "step": 1,
                    "call_id": "call_x",
                    "content": text(INTERRUPTED_TEXT),
                    "is_error": True,
                    "error": {"name": "InterruptedError", "code": "interrupted"},
                },
            ),
            ("step/end", n + 1, {"turn": 2, "step": 1}),
            ("turn/end", n + 2, {"turn": 2, "reason": {"kind": "interrupted"}}),
        ]
        # the repair is on disk before any new turn runs
        assert released(stored(path)) == released(events)
        history = agent.session.derive_messages()
        assert history[-1] == {
            "role": "user",
            "content": [
                {"type": "tool-result", "tool_call_id": "call_x", "content": text(INTERRUPTED_TEXT), "is_error": True}
            ],
        }
        await prompt(agent, "are you back?")
        assert turns_of(agent.session.events) == [1, 2, 3]
        assert agent.session.last("turn/end").data == {"turn": 3, "reason": {"kind": "completed"}}  # type: ignore[union-attr]
        final = agent.session.events
        with anyio.fail_after(5):
            await handle.dispose()
    on_disk = stored(path)
    assert released(on_disk) == released(final)
    assert_balanced(on_disk)


async def test_a_crashed_first_turn_resumes_as_turn_2(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    path = data / "crashed.jsonl"
    path.write_bytes(file_bytes(header("crashed"), events_of(*open_turn(1))))
    async with lifetime(data) as ctx:
        handle = await ctx.agents.resume(agent_id="a", resume_session_id="crashed", agent_options=ECHO)
        agent = agent_of(handle)
        assert [e.type for e in agent.session.events][-3:] == ["tool/result", "step/end", "turn/end"]
        await prompt(agent, "next")
        assert turns_of(agent.session.events) == [1, 2]
        reasons = [e.data["reason"]["kind"] for e in agent.session.events if e.type == "turn/end"]
        assert reasons == ["interrupted", "completed"]
    on_disk = stored(path)
    assert turns_of(on_disk) == [1, 2]
    assert_balanced(on_disk)


async def test_resume_of_an_unknown_session_is_session_not_found(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with lifetime(data) as ctx:
        with pytest.raises(SessionNotFoundError) as caught:
            await ctx.agents.resume(agent_id="a", resume_session_id="nowhere", agent_options=ECHO)
        assert error_code(caught.value) == "SESSION_NOT_FOUND"
        assert isinstance(caught.value, KeyError)
        assert ctx.agents.get("a") is None
        assert ctx.sessions.list() == []
        handle = await ctx.agents.create(agent_id="a", session_id="fresh", agent_options=ECHO)
        await prompt(agent_of(handle), "the id is free")
    assert sorted(p.name for p in data.iterdir()) == ["fresh.jsonl"]


@pytest.mark.parametrize("hostile", ["../x", "/etc/passwd", "a\x00b", ""])
async def test_resume_of_a_hostile_id_is_rejected_and_touches_nothing(tmp_path: Path, hostile: str) -> None:
    data = tmp_path / "a" / "data"
    data.mkdir(parents=True)
    (tmp_path / "x.jsonl").write_bytes(file_bytes(header("x"), events_of(*closed_turn(1))))
    before = tree(tmp_path)
    async with lifetime(data) as ctx:
        with pytest.raises(ValueError, match="invalid session id"):
            await ctx.agents.resume(agent_id="a", resume_session_id=hostile, agent_options=ECHO)
        assert ctx.agents.get("a") is None
        assert ctx.sessions.list() == []
    assert tree(tmp_path) == before


async def test_a_failed_resume_releases_the_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    data.mkdir()
    path = data / "s1.jsonl"
    path.write_bytes(file_bytes(header("s1"), events_of(*closed_turn(1))))
    async with lifetime(data) as ctx:
        persistence: JsonlPersistence = ctx.session_persistence
        real_load = persistence.load
        racers: list[ReactLoopAgent] = []

        async def racing_load(session_id: str) -> Any:
            loaded = await real_load(session_id)
            racers.append(ctx.agent_loop.create("a", ECHO))  # the agent id is taken while resume awaits
            return loaded

        monkeypatch.setattr(persistence, "load", racing_load)
        with pytest.raises(ValueError, match="already exists"):
            await ctx.agents.resume(agent_id="a", resume_session_id="s1", agent_options=ECHO)
        monkeypatch.undo()
        assert ctx.agents.get("a") is racers[0]
        assert ctx.sessions.get("s1") is None
        assert fds_open_to(path) == []
        assert lock_is_free(path)
        assert await load_in_other_process(data, "s1") == "LOADED 7"
        handle = await ctx.agents.resume(agent_id="b", resume_session_id="s1", agent_options=ECHO)
        await prompt(agent_of(handle), "resumed after all")
        assert turns_of(agent_of(handle).session.events) == [1, 2]


async def test_resume_with_a_taken_agent_id_leaves_the_file_loadable(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    path = data / "s1.jsonl"
    content = file_bytes(header("s1"), events_of(*open_turn(1)))
    path.write_bytes(content)
    async with lifetime(data) as ctx:
        await ctx.agents.create(agent_id="a", session_id="other", agent_options=ECHO)
        with pytest.raises(ValueError, match="already exists"):
            await ctx.agents.resume(agent_id="a", resume_session_id="s1", agent_options=ECHO)
        assert path.read_bytes() == content  # rejected before loading: not even repaired
        assert lock_is_free(path)
        loaded = await ctx.session_persistence.load("s1")
        assert len(loaded.events) == 7
        ctx.session_persistence.release("s1")


async def test_resume_of_a_session_live_in_this_process_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    path = data / "s1.jsonl"
    async with lifetime(data) as ctx:
        handle = await ctx.agents.create(agent_id="a", session_id="s1", agent_options=ECHO)
        await prompt(agent_of(handle), "hello")
        before = path.read_bytes()
        with pytest.raises(SessionLockedError):
            await ctx.agents.resume(agent_id="b", resume_session_id="s1", agent_options=ECHO)
        assert ctx.agents.get("b") is None
        assert path.read_bytes() == before
        await prompt(agent_of(handle), "still mine")  # the live session keeps writing its file
        assert released(stored(path)) == released(agent_of(handle).session.events)
        assert turns_of(stored(path)) == [1, 2]


# -- a daemon killed mid-stream -----------------------------------------------------------------------------

_KILLED_CHILD = """
import os, signal, sys, anyio
from pathlib import Path
from dsh import events as ev
from dsh.app import load_core
from dsh.kernel import App
from dsh.services.agents import AgentOptions
from dsh.services.tools import ToolDefinition

async def lookup(arguments, execution):
    return "found"

async def main():
    data, kill_at = Path(sys.argv[1]), int(sys.argv[2])
    async with App() as app:
        ctx = app.ctx
        load_core(ctx, data_dir=data)
        ctx.tools.register(ToolDefinition("lookup", "look up", {"type": "object"}, lookup))
        ctx.scripted_models.add("s", [
            {"text": "first answer"},
            {"reasoning": "let me think about it", "text": "calling the tool right now", "delay": 0.001,
             "tool_calls": [{"name": "lookup", "arguments": {"q": 1}}, {"name": "lookup", "arguments": {"q": 2}}]},
            {"text": "the final answer is here at last", "delay": 0.001},
        ])
        handle = await ctx.agents.create(agent_id="a", session_id="s1", agent_options=AgentOptions(model="scripted:s"))
        agent = handle.agent
        agent.send([{"type": "text", "text": "first"}])
        await agent.when_idle()
        print(agent.session.seq, flush=True)
        base = agent.session.seq

        def killer(session, event):
            if event.seq == base + kill_at:
                os.kill(os.getpid(), signal.SIGKILL)

        ctx.on(ev.SESSION_EVENT, killer)
        agent.send([{"type": "text", "text": "second"}])
        await agent.when_idle()
        print("not killed", agent.session.seq - base, flush=True)

anyio.run(main)
"""


@pytest.mark.parametrize("kill_at", [0, 5, 14, 26, 37])
async def test_a_session_killed_mid_stream_loads_closed_and_continues(tmp_path: Path, kill_at: int) -> None:
    """SIGKILL at the append of the second turn's event number *kill_at*. The model pauses between chunks
    (as a real one does), so what was appended before the last pause is on disk although nothing flushed it."""
    data = tmp_path / "data"
    path = data / "s1.jsonl"
    with anyio.fail_after(20):
        result = await anyio.run_process([sys.executable, "-c", _KILLED_CHILD, str(data), str(kill_at)], check=False)
    assert result.returncode == -signal.SIGKILL, (result.stdout, result.stderr.decode())
    first_turn_events = int(result.stdout.decode().split()[0])

    async with lifetime(data) as ctx:
        handle = await ctx.agents.resume(agent_id="a", resume_session_id="s1", agent_options=ECHO)
        agent = agent_of(handle)
        events = agent.session.events
        assert len(events) >= first_turn_events  # the flushed first turn survived whole
        assert turns_of(events[:first_turn_events]) == [1]
        assert events[first_turn_events - 1].type == "turn/end"
        assert_balanced(events)
        turns = turns_of(events)
        if kill_at == 0:  # killed while appending turn/start: the second turn never reached the disk
            assert turns == [1]
            assert len(events) == first_turn_events
        else:  # part of the second turn was written without any flush, and is now closed
            assert turns == [1, 2]
            assert events[first_turn_events].data["turn"] == 2
            assert events[-1].data == {"turn": 2, "reason": {"kind": "interrupted"}}
        await prompt(agent, "after the crash")
        assert turns_of(agent.session.events) == [*turns, len(turns) + 1]
        final = agent.session.events
    on_disk = stored(path)
    assert released(on_disk) == released(final)
    assert_balanced(on_disk)
