"""#10 items 1, 2, 6b at the backend and session level: the nesting limit, no seq holes, failed writes and
syncs, the data directory check, and streamed chunks released from memory once the file holds them."""

from __future__ import annotations

import errno
import itertools
import os
from pathlib import Path
from typing import cast

import anyio
import pytest
from structlog.testing import capture_logs

from dsh._jsonlimits import MAX_JSON_DEPTH, MAX_LOG_DEPTH, check_depth, exceeds_depth, text_may_exceed
from dsh.app import load_core
from dsh.kernel import App
from dsh.loop._agent import ReactLoopAgent
from dsh.plugins.persistence import CorruptSessionError, JsonlPersistence, _jsonl
from dsh.plugins.persistence._format import scan
from dsh.plugins.persistence._jsonl import SessionWriteError, StorageUnavailableError
from dsh.services.agents import AgentOptions
from dsh.services.sessions import NotJsonError, Session, SessionEvent, SessionHeader

from ._helpers import (
    DiskFull,
    closed_turn,
    disk_events,
    events_of,
    file_bytes,
    header,
    lifetime,
    load_in_other_process,
    open_session,
    released,
    text,
)

TURN_START = {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}}


def nested(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = {"a": value}
    return value


# -- the limit itself ----------------------------------------------------------------------------------------


def test_depth_counts_containers_and_stops_early() -> None:
    assert not exceeds_depth(1, 0) and not exceeds_depth("x" * 1000, 0)
    assert exceeds_depth([], 0) and not exceeds_depth([], 1)
    assert not exceeds_depth({"a": [1, {"b": []}]}, 4) and exceeds_depth({"a": [1, {"b": []}]}, 3)
    assert not exceeds_depth(nested(MAX_JSON_DEPTH)) and exceeds_depth(nested(MAX_JSON_DEPTH + 1))
    assert exceeds_depth(nested(50_000))  # iterative: no RecursionError however deep
    with pytest.raises(ValueError, match="prompt is nested deeper than 128 levels"):
        check_depth(nested(200), "prompt")


def test_the_text_prefilter_never_misses_a_deep_value() -> None:
    assert text_may_exceed('"' + "[" * 200 + '"')  # brackets in strings count too: a safe over-estimate
    assert text_may_exceed("[" * 129 + "]" * 129)
    assert not text_may_exceed("[" * 128 + "]" * 128)
    assert text_may_exceed(b"{" * 200)


def test_an_append_too_deep_is_refused_before_the_event_exists() -> None:
    session = Session(SessionHeader(id="s", created_at=0.0))
    session.append("turn/start", TURN_START)
    with pytest.raises(NotJsonError, match=f"nested deeper than {MAX_LOG_DEPTH} levels"):
        session.append("user/message", {"content": [{"type": "text", "text": "x", "_meta": nested(MAX_LOG_DEPTH)}]})
    assert session.seq == 1 and [e.type for e in session.events] == ["turn/start"]  # no event, no seq used
    session.append("user/message", {"content": [{"type": "text", "text": "x", "_meta": nested(MAX_JSON_DEPTH)}]})
    assert session.seq == 2


# -- loading never crashes on a deep line ------------------------------------------------------------------


@pytest.mark.parametrize("depth", [1_100, 5_000, 100_000])
def test_a_deep_line_is_a_named_corruption_not_a_crash(depth: int) -> None:
    """Deeper than the parsers go (orjson: 1024, the stdlib: the recursion limit): a named error, never a
    ``RecursionError``. (dsh writes nothing deeper than ``MAX_LOG_DEPTH``; a hand-made line between that and the
    parsers' ceiling loads.)"""
    good = events_of(*closed_turn(1))
    head = header("s1")
    deep = '{"type":"context/message","seq":1,"time":1.0,"data":' + '{"a":' * depth + "1" + "}" * depth + "}\n"
    after = SessionEvent(good[1].type, 2, good[1].time, good[1].data)
    content = file_bytes(head, good[:1]) + deep.encode() + file_bytes(head, [after])[len(file_bytes(head, [])) :]
    with pytest.raises(CorruptSessionError, match=r"s1\.jsonl:3: the event is nested deeper than"):
        scan(content, "/data/s1.jsonl")


def test_a_deep_header_is_a_named_corruption() -> None:
    with pytest.raises(CorruptSessionError, match="the header is nested too deep"):
        scan(b"[" * 100_000 + b"]" * 100_000 + b"\n", "/data/s1.jsonl")


async def test_a_deep_line_fails_that_load_only(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "good.jsonl").write_bytes(file_bytes(header("good"), events_of(*closed_turn(1))))
    bad = file_bytes(header("bad"), events_of(*closed_turn(1)[:1]))
    (data / "bad.jsonl").write_bytes(
        bad + b'{"type":"x","seq":1,"time":1.0,"data":' + b"[" * 3000 + b"]" * 3000 + b"}\n"
    )
    persistence = JsonlPersistence(data)
    with pytest.raises(CorruptSessionError, match=r"bad\.jsonl:3"):
        await persistence.load("bad")
    loaded = await persistence.load("good")
    assert len(loaded.events) == len(closed_turn(1))
    assert {info.id for info in await persistence.list()} == {"good", "bad"}  # listing reads no deep line
    persistence.close_all()


# -- writes that fail ----------------------------------------------------------------------------------------


async def test_a_failed_fsync_cuts_back_to_what_was_durable_and_retries_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fsync may fail after write succeeded (EIO, ENOSPC on delayed allocation): the written lines may not be on
    disk, so the file is cut back to the last synced size and they are written again by the next flush."""
    data = tmp_path / "data"
    calls = {"fail": False}
    real = _jsonl._fsync

    def fsync(fd: int) -> None:
        if calls["fail"]:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real(fd)

    monkeypatch.setattr(_jsonl, "_fsync", fsync)
    async with lifetime(data) as ctx:
        session, _ = open_session(ctx, "s1")
        path = data / "s1.jsonl"
        session.append("turn/start", TURN_START)
        await ctx.sessions.flush(session)
        durable = path.read_bytes()
        session.append("user/message", {"content": text("lost?"), "source": {"kind": "user"}})
        calls["fail"] = True
        with pytest.raises(SessionWriteError, match="Input/output error"):
            await ctx.sessions.flush(session)
        assert path.read_bytes() == durable
        calls["fail"] = False
        await ctx.sessions.flush(session)
        assert disk_events(path) == [event.to_json() for event in session.events]


async def test_an_event_that_cannot_be_encoded_never_leaves_a_hole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defence in depth behind the nesting limit: if an event's line cannot be made, no later line is written
    (the file ends before it, a sound prefix), and every flush says so."""
    data = tmp_path / "data"
    real = _jsonl.encode_event

    def encode(event: SessionEvent) -> bytes:
        if event.type == "poison":
            raise RecursionError("maximum recursion depth exceeded")
        return real(event)

    monkeypatch.setattr(_jsonl, "encode_event", encode)
    async with lifetime(data) as ctx:
        session, detach = open_session(ctx, "s1")
        path = data / "s1.jsonl"
        session.append("turn/start", TURN_START)
        await ctx.sessions.flush(session)
        session.append("poison", {"x": 1})
        session.append("user/message", {"content": text("after"), "source": {"kind": "user"}})
        with pytest.raises(SessionWriteError, match=r"event 1 \(poison\) cannot be stored"):
            await ctx.sessions.flush(session)
        await detach()
    assert [event["seq"] for event in disk_events(path)] == [0]
    assert await load_in_other_process(data, "s1") == "LOADED 2"  # turn/start, then the repair's turn/end


async def test_a_full_disk_costs_one_log_line_per_failed_flush_not_one_per_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    full = DiskFull(monkeypatch)
    async with lifetime(data) as ctx:
        session, _ = open_session(ctx, "s1")
        full.on = True
        with capture_logs() as logs:
            for index in range(200):
                session.append("context/message", {"content": text(f"{index}"), "source": {"kind": "user"}})
                await anyio.lowlevel.checkpoint()
            with pytest.raises(SessionWriteError):
                await ctx.sessions.flush(session)
        assert [entry for entry in logs if entry["log_level"] in ("warning", "error")] == []  # the caller reports
        assert full.failures <= 3
        full.on = False
        await ctx.sessions.flush(session)
        assert len(disk_events(data / "s1.jsonl")) == 200


# -- the data directory --------------------------------------------------------------------------------------


def test_a_missing_data_directory_is_created(tmp_path: Path) -> None:
    root = tmp_path / "a" / "b" / "sessions"
    assert JsonlPersistence(root).check_root() is None
    assert root.is_dir() and list(root.iterdir()) == []  # the probe is gone


@pytest.mark.parametrize("kind", ["file", "file parent", "read-only"])
async def test_a_data_directory_that_cannot_hold_sessions_is_named_with_the_setting(tmp_path: Path, kind: str) -> None:
    if kind == "file":
        root = tmp_path / "sessions"
        root.write_text("x")
    elif kind == "file parent":
        (tmp_path / "blocker").write_text("x")
        root = tmp_path / "blocker" / "sessions"
    else:
        if os.geteuid() == 0:
            pytest.skip("root writes into read-only directories")
        root = tmp_path / "ro"
        root.mkdir(mode=0o500)
    persistence = JsonlPersistence(root)
    problem = persistence.check_root()
    assert problem is not None and str(root) in problem and "--data-dir" in problem and "DSH_DATA_DIR" in problem
    for call in (persistence.list(), persistence.load("s"), persistence.has("s"), persistence.delete("s")):
        with pytest.raises(StorageUnavailableError) as caught:
            await call
        assert caught.value.message == problem and caught.value.rpc_data()["dataDir"] == str(root)


async def test_a_data_directory_fixed_while_running_is_picked_up(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    root.write_text("x")
    async with lifetime(root) as ctx:
        with pytest.raises(StorageUnavailableError):
            await ctx.agents.create(agent_id="a", session_id="s1", agent_options=AgentOptions(model="echo"))
        assert ctx.sessions.get("s1") is None and ctx.agents.get("a") is None
        root.unlink()
        handle = await ctx.agents.create(agent_id="a", session_id="s1", agent_options=AgentOptions(model="echo"))
        assert (root / "s1.jsonl").read_bytes() == file_bytes(handle.agent.session.header, [])
        await handle.dispose()


# -- chunks are released once durable (item 6b) ---------------------------------------------------------------


def test_release_chunks_drops_only_chunks_of_closed_steps() -> None:
    session = Session(SessionHeader(id="s", created_at=0.0))
    chunk = {"type": "text-delta", "text": "x"}
    session.append("turn/start", TURN_START)
    session.append("step/start", {"turn": 1, "step": 1})
    for _ in range(3):
        session.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk})
    session.append("assistant/message", {"turn": 1, "step": 1, "content": text("xxx")})
    session.append("step/end", {"turn": 1, "step": 1})
    session.append("step/start", {"turn": 1, "step": 2})
    session.append("assistant/chunk", {"turn": 1, "step": 2, "chunk": chunk})  # step 2 still streaming
    before = session.derive_messages()
    assert session.release_chunks(session.seq) == 3
    assert [e.seq for e in session.events] == [0, 1, 5, 6, 7, 8]
    assert session.seq == 9 and session.derive_messages() == before
    assert session.release_chunks(session.seq) == 0
    session.append("assistant/chunk", {"turn": 1, "step": 2, "chunk": chunk})
    session.append("assistant/message", {"turn": 1, "step": 2, "content": text("xx")})
    assert session.release_chunks(10) == 0  # step 2 closes at seq 10: not before the durable point yet
    assert session.release_chunks(session.seq) == 2
    assert [e.type for e in session.events].count("assistant/chunk") == 0
    assert session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}}).seq == 11
    assert len(session.derive_messages()) == 2


async def test_a_long_lived_session_does_not_keep_streamed_chunks(tmp_path: Path) -> None:
    """Memory of a live session grows with its turns, not with every streamed chunk: after each turn's flush
    none of its chunks is held; the file keeps them all, and a load replays them."""
    data = tmp_path / "data"
    async with lifetime(data) as ctx:
        handle = await ctx.agents.create(agent_id="a", session_id="s1", agent_options=AgentOptions(model="echo"))
        agent = cast(ReactLoopAgent, handle.agent)
        sizes = []
        for index in range(5):
            agent.send(text(" ".join(f"word{index}-{n}" for n in range(200))))
            with anyio.fail_after(10):
                await agent.when_idle()
            held = agent.session.events
            assert [e.type for e in held].count("assistant/chunk") == 0
            sizes.append(len(held))
        assert len({b - a for a, b in itertools.pairwise(sizes)}) == 1  # the same per turn
        with anyio.fail_after(5):
            await handle.dispose()
    on_disk = [SessionEvent.from_json(line) for line in disk_events(data / "s1.jsonl")]
    assert sum(1 for e in on_disk if e.type == "assistant/chunk") >= 5 * 200
    assert released(on_disk) == list(held)
    async with lifetime(data) as ctx:
        loaded = await ctx.session_persistence.load("s1")
        assert [e.type for e in loaded.events].count("assistant/chunk") >= 5 * 200
        ctx.session_persistence.release("s1")


async def test_a_configured_agent_on_an_unusable_data_directory_is_a_warning_not_a_crash(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    root.write_text("x")
    with capture_logs() as logs:
        async with App() as application:
            load_core(application.ctx, data_dir=root, agent_loop={"agents": [{"id": "main", "model": "echo"}]})
            assert application.ctx.agents.get("main") is None
    warnings = [entry for entry in logs if entry["event"] == "configured agent could not be created"]
    assert len(warnings) == 1 and str(root) in warnings[0]["error"]
