"""``JsonlPersistence`` through a real App: the write path, locking, repair on load, ids, list/delete/release."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, cast

import anyio
import anyio.lowlevel
import pytest

from dsh.loop._agent import ReactLoopAgent
from dsh.plugins.persistence import CorruptSessionError, JsonlPersistence, SessionLockedError, SessionNotFoundError
from dsh.plugins.persistence._format import encode_event, scan
from dsh.plugins.persistence._jsonl import SessionWriteError
from dsh.services.agents import AgentOptions
from dsh.services.sessions import SessionEvent, SessionInfo
from dsh.services.tools import ToolDefinition, ToolExecution

from ._helpers import (
    INTERRUPTED_TEXT,
    DiskFull,
    checkpoints_until,
    closed_turn,
    disk_events,
    events_of,
    fds_open_to,
    file_bytes,
    header,
    held_by_other_process,
    lifetime,
    lines_of,
    load_in_other_process,
    lock_is_free,
    lockable_by_other_process,
    open_session,
    open_turn,
    released,
    spy_os,
    text,
    tree,
)

TURN_START = {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}}


def line_count(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


# -- the write path -----------------------------------------------------------------------------------------


async def test_a_session_is_on_disk_from_its_creation(tmp_path: Path) -> None:
    """#10 item 3 (the expectation changed from "nothing on disk before the first event"): the header is
    written durably when the session is created, so another process can load it before any prompt."""
    data = tmp_path / "data"
    async with lifetime(data) as ctx:
        session, detach = open_session(ctx, "quiet", meta={"cwd": "/work"})
        path = data / "quiet.jsonl"
        assert path.read_bytes() == file_bytes(session.header, [])  # at once, no checkpoint needed
        assert await ctx.session_persistence.list() == []  # listed only once it has events
        await detach()
        assert path.read_bytes() == file_bytes(session.header, [])
    assert await load_in_other_process(data, "quiet") == "LOADED 0"


async def test_the_file_is_created_atomically_and_durably(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spy = spy_os(monkeypatch)
    data = tmp_path / "data"
    async with lifetime(data) as ctx:
        session, _ = open_session(ctx, "s1", meta={"cwd": "/work"})
        path = data / "s1.jsonl"
        assert len(spy.renames) == 1
        source, destination, content, existed = spy.renames[0]
        assert destination == str(path)
        assert Path(source).parent == data  # same directory: rename(2) is atomic
        assert not existed
        assert content == file_bytes(session.header, [])  # never half a header
        assert "fsync" in spy.calls[: spy.calls.index("rename")]  # the content is durable before it is named
        assert sorted(p.name for p in data.iterdir()) == ["s1.jsonl"]  # no temporary left behind
        first = session.append("turn/start", TURN_START)
        session.append("user/message", {"content": text("hi"), "source": {"kind": "user"}})
        await ctx.sessions.flush(session)
        assert len(spy.renames) == 1  # later writes append
        assert disk_events(path)[0] == first.to_json()
    assert sorted(p.name for p in data.iterdir()) == ["s1.jsonl"]


async def test_events_reach_the_file_promptly_without_a_flush(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spy = spy_os(monkeypatch)
    data = tmp_path / "data"
    async with lifetime(data) as ctx:
        session, _ = open_session(ctx, "s1")
        path = data / "s1.jsonl"
        session.append("turn/start", TURN_START)
        await checkpoints_until(lambda: line_count(path) == 2, limit=10)
        session.append("user/message", {"content": text("one"), "source": {"kind": "user"}})
        session.append("step/start", {"turn": 1, "step": 1})
        await checkpoints_until(lambda: line_count(path) == 4, limit=10)
        for index in range(5):
            session.append(
                "assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "text": f"{index}"}}
            )
        await checkpoints_until(lambda: line_count(path) == 9, limit=10)
        assert disk_events(path) == [event.to_json() for event in session.events]
        assert [name for name, _ in spy.fsyncs if name == str(path)] == []  # written, not yet made durable


async def test_flush_writes_what_is_queued_then_fsyncs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spy = spy_os(monkeypatch)
    data = tmp_path / "data"
    async with lifetime(data) as ctx:
        session, _ = open_session(ctx, "s1")
        path = data / "s1.jsonl"
        session.append("turn/start", TURN_START)
        await checkpoints_until(path.exists)
        before = len(spy.fsyncs)
        session.append("user/message", {"content": text("one"), "source": {"kind": "user"}})
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        await ctx.sessions.flush(session)  # no checkpoint in between: the flush itself must write
        size = path.stat().st_size
        assert disk_events(path) == [event.to_json() for event in session.events]
        assert spy.fsyncs[before:] == [(str(path), size)]  # fsync of the session file, after all was written


async def test_a_flush_of_a_session_never_written_creates_it_durably(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = spy_os(monkeypatch)
    data = tmp_path / "data"
    async with lifetime(data) as ctx:
        session, _ = open_session(ctx, "s1")
        session.append("turn/start", TURN_START)
        await ctx.sessions.flush(session)  # before the writer task ran
        path = data / "s1.jsonl"
        assert disk_events(path) == [session.events[0].to_json()]
        assert spy.fsyncs[-1] == (str(path), path.stat().st_size)


async def test_dispose_writes_and_fsyncs_then_closes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spy = spy_os(monkeypatch)
    data = tmp_path / "data"
    path = data / "s1.jsonl"
    async with lifetime(data) as ctx:
        session, detach = open_session(ctx, "s1")
        session.append("turn/start", TURN_START)
        await checkpoints_until(path.exists)
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        assert fds_open_to(path) != []
        await detach()  # at once: the pending turn/end is written on disposal
        assert disk_events(path) == [event.to_json() for event in session.events]
        assert spy.fsyncs[-1] == (str(path), path.stat().st_size)
        assert fds_open_to(path) == []
        assert lock_is_free(path)


async def test_leaving_the_app_writes_every_pending_event(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with lifetime(data) as ctx:
        session, _ = open_session(ctx, "s1")
        session.append("turn/start", TURN_START)
        await ctx.sessions.flush(session)
        for index in range(3):
            session.append(
                "assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "text": f"{index}"}}
            )
        expected = [event.to_json() for event in session.events]
    assert disk_events(data / "s1.jsonl") == expected
    assert fds_open_to(data / "s1.jsonl") == []


async def _lookup(arguments: Any, execution: ToolExecution) -> str:
    return f"looked up {arguments}"


async def test_the_file_is_the_header_then_one_line_per_event_chunks_included(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with lifetime(data) as ctx:
        ctx.tools.register(ToolDefinition("lookup", "look something up", {"type": "object"}, _lookup))
        ctx.scripted_models.add(
            "s",
            [
                {
                    "reasoning": "let me think",
                    "text": "calling the tool",
                    "tool_calls": [{"name": "lookup", "arguments": {"q": 1}}],
                },
                {"text": "found it ünïcode"},
            ],
        )
        handle = await ctx.agents.create(
            agent_id="a", session_id="s1", meta={"cwd": "/work/project"}, agent_options=AgentOptions(model="scripted:s")
        )
        agent = cast(ReactLoopAgent, handle.agent)
        agent.send(text("look it up"))
        with anyio.fail_after(5):
            await agent.when_idle()
            await handle.dispose()
        session = agent.session
    lines = lines_of(data / "s1.jsonl")
    assert lines[0] == {
        "type": "session",
        "version": 1,
        "id": "s1",
        "created_at": session.header.created_at,
        "cwd": "/work/project",
    }
    on_disk = [SessionEvent.from_json(line) for line in lines[1:]]
    assert released(on_disk) == list(session.events)  # memory lost only the chunks the file keeps
    assert [line["seq"] for line in lines[1:]] == list(range(len(lines) - 1))
    kinds = [line["type"] for line in lines[1:]]
    assert kinds.count("assistant/chunk") >= 4
    assert {"tool/call", "tool/result", "assistant/message", "turn/end"} <= set(kinds)
    raw = (data / "s1.jsonl").read_bytes()
    raw.decode("utf-8")  # compact UTF-8 (orjson), text unescaped; the lines round-trip above
    assert "found it ünïcode".encode() in raw


async def test_a_new_session_never_clobbers_an_existing_file(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    path = data / "s1.jsonl"
    original = file_bytes(header("s1"), events_of(*closed_turn(1)))
    path.write_bytes(original)
    async with lifetime(data) as ctx:
        with pytest.raises(SessionWriteError) as caught:
            open_session(ctx, "s1")
        assert "already exists" in caught.value.message
    assert path.read_bytes() == original
    assert sorted(p.name for p in data.iterdir()) == ["s1.jsonl"]


async def test_a_failed_write_loses_no_queued_event(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    full = DiskFull(monkeypatch)
    async with lifetime(data) as ctx:
        session, _ = open_session(ctx, "s1")
        path = data / "s1.jsonl"
        full.on = True
        session.append("turn/start", TURN_START)
        for _ in range(10):  # the writer task tries, fails and leaves it to the flush
            await anyio.lowlevel.checkpoint()
        with pytest.raises(SessionWriteError) as caught:
            await ctx.sessions.flush(session)
        assert "No space left on device" in caught.value.message and str(path) in caught.value.message
        assert path.read_bytes() == file_bytes(session.header, [])  # what was durable, exactly
        full.on = False  # the disk frees up
        session.append("user/message", {"content": text("still here"), "source": {"kind": "user"}})
        await ctx.sessions.flush(session)
        expected = [event.to_json() for event in session.events]
    assert disk_events(path) == expected


# -- one writer per file ------------------------------------------------------------------------------------


async def test_a_second_load_in_the_same_process_fails(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    stored = data / "stored.jsonl"
    stored.write_bytes(file_bytes(header("stored"), events_of(*closed_turn(1))))
    async with lifetime(data) as ctx:
        persistence: JsonlPersistence = ctx.session_persistence
        live, _ = open_session(ctx, "live")
        live.append("turn/start", TURN_START)
        await ctx.sessions.flush(live)
        before = (data / "live.jsonl").read_bytes()
        with pytest.raises(SessionLockedError) as caught:
            await persistence.load("live")
        assert caught.value.code == "SESSION_LOCKED"
        assert (data / "live.jsonl").read_bytes() == before

        loaded = await persistence.load("stored")
        assert [event.type for event in loaded.events] == [kind for kind, _ in closed_turn(1)]
        with pytest.raises(SessionLockedError):
            await persistence.load("stored")
        # a live session with no file yet is open here too
        open_session(ctx, "unwritten")
        with pytest.raises(SessionLockedError):
            await persistence.load("unwritten")


async def test_another_process_cannot_load_a_session_held_here(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with lifetime(data) as ctx:
        session, detach = open_session(ctx, "s1")
        for kind, payload in open_turn(1):
            session.append(kind, payload)
        await ctx.sessions.flush(session)
        before = (data / "s1.jsonl").read_bytes()
        assert await load_in_other_process(data, "s1") == "LOCKED SESSION_LOCKED"
        assert (data / "s1.jsonl").read_bytes() == before  # not repaired behind our back
        await detach()
        # once disposed here, the other process may take it (and repairs the open turn)
        assert await load_in_other_process(data, "s1") == "LOADED 7"


async def test_load_fails_while_another_process_holds_the_lock(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    path = data / "s1.jsonl"
    original = file_bytes(header("s1"), events_of(*open_turn(1))) + b'{"type":"tool/res'  # needs repair
    path.write_bytes(original)
    persistence = JsonlPersistence(data)
    async with held_by_other_process(path):
        with pytest.raises(SessionLockedError) as caught:
            await persistence.load("s1")
        assert str(path) in str(caught.value)
        assert path.read_bytes() == original
        with pytest.raises(SessionLockedError):
            await persistence.delete("s1")
        assert path.read_bytes() == original
        assert fds_open_to(path) == []
    loaded = await persistence.load("s1")  # free again: now it loads and repairs
    assert [event.type for event in loaded.events][-3:] == ["tool/result", "step/end", "turn/end"]
    persistence.release("s1")


async def test_disposal_releases_the_lock(tmp_path: Path) -> None:
    data = tmp_path / "data"
    path = data / "s1.jsonl"
    async with lifetime(data) as ctx:
        session, detach = open_session(ctx, "s1")
        session.append("turn/start", TURN_START)
        await ctx.sessions.flush(session)
        assert not await lockable_by_other_process(path)
        assert not lock_is_free(path)
        await detach()
        assert await lockable_by_other_process(path)
        assert lock_is_free(path)


async def test_leaving_the_app_releases_loaded_sessions(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    path = data / "s1.jsonl"
    path.write_bytes(file_bytes(header("s1"), events_of(*closed_turn(1))))
    async with lifetime(data) as ctx:
        await ctx.session_persistence.load("s1")
        assert not lock_is_free(path)
    assert lock_is_free(path)
    assert fds_open_to(path) == []


# -- repair on load -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("torn", [b'{"type":"tool/result","seq":4,"ti', b'{"type":"tool/result","seq":4,"ti\n', b""])
async def test_load_repairs_a_crashed_session_durably(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, torn: bytes
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    path = data / "s1.jsonl"
    head = header("s1", cwd="/work")
    events = events_of(*open_turn(1))
    sound = file_bytes(head, events)
    path.write_bytes(sound + torn)
    spy = spy_os(monkeypatch)
    persistence = JsonlPersistence(data)
    loaded = await persistence.load("s1")
    assert loaded.header == head
    assert loaded.events[:4] == events
    closers = loaded.events[4:]
    assert [(c.type, c.seq) for c in closers] == [("tool/result", 4), ("step/end", 5), ("turn/end", 6)]
    assert closers[0].data["content"] == text(INTERRUPTED_TEXT)
    assert closers[-1].data == {"turn": 1, "reason": {"kind": "interrupted"}}
    # on disk: the torn line is cut, the closers are appended, and all of it was fsynced before load returned
    assert path.read_bytes() == sound + b"".join(encode_event(c) for c in closers)
    assert spy.truncates == ([len(sound)] if torn else [])
    assert spy.fsyncs == [(str(path), path.stat().st_size)]
    assert spy.calls.index("fsync") > spy.calls.index("write")
    rescanned = scan(path.read_bytes(), str(path))
    assert rescanned.closers == []
    assert rescanned.events == list(loaded.events)
    persistence.release("s1")


async def test_load_of_a_sound_file_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    data.mkdir()
    path = data / "s1.jsonl"
    content = file_bytes(header("s1"), events_of(*closed_turn(1), *closed_turn(2)))
    path.write_bytes(content)
    mtime = path.stat().st_mtime_ns
    spy = spy_os(monkeypatch)
    persistence = JsonlPersistence(data)
    loaded = await persistence.load("s1")
    assert len(loaded.events) == 14
    assert "write" not in spy.calls and "ftruncate" not in spy.calls
    assert path.read_bytes() == content
    assert path.stat().st_mtime_ns == mtime
    persistence.release("s1")


async def test_load_of_a_corrupt_middle_raises_and_leaves_the_file_exactly_as_it_was(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    path = data / "s1.jsonl"
    lines = file_bytes(header("s1"), events_of(*open_turn(1))).split(b"\n")
    lines[2] = b'{"type":"user/message","seq":1,"time":1,"data":{"content":[{"ty'  # line 3 of the file
    original = b"\n".join(lines) + b'{"type":"torn'  # a torn tail too: still nothing may change
    path.write_bytes(original)
    stat = path.stat()
    persistence = JsonlPersistence(data)
    for _ in range(2):  # the failure leaves no lock behind: the second attempt fails the same way
        with pytest.raises(CorruptSessionError) as caught:
            await persistence.load("s1")
        assert f"{path}:3:" in str(caught.value)
        assert caught.value.code == "SESSION_CORRUPT"
        assert path.read_bytes() == original
        assert path.stat().st_mtime_ns == stat.st_mtime_ns
        assert lock_is_free(path)
        assert fds_open_to(path) == []


async def test_a_header_naming_another_session_is_corrupt(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    path = data / "s1.jsonl"
    original = file_bytes(header("other"), events_of(*open_turn(1)))
    path.write_bytes(original)
    persistence = JsonlPersistence(data)
    with pytest.raises(CorruptSessionError, match="other"):
        await persistence.load("s1")
    assert path.read_bytes() == original
    assert lock_is_free(path)


async def test_loading_an_unknown_session_is_not_found(tmp_path: Path) -> None:
    data = tmp_path / "data"
    persistence = JsonlPersistence(data)
    with pytest.raises(SessionNotFoundError) as caught:
        await persistence.load("nowhere")
    assert isinstance(caught.value, KeyError)
    assert caught.value.code == "SESSION_NOT_FOUND"
    assert "nowhere" in str(caught.value)
    assert not data.exists()
    assert await persistence.has("nowhere") is False


# -- ids ----------------------------------------------------------------------------------------------------

HOSTILE_IDS = [
    "../x",
    "/etc/passwd",
    "%2e%2e%2f",
    "a\x00b",
    "x" * 10_000,
    "",
    ".",
    "..",
    "...",
    "a/b",
    "a\\b",
    "a b",
    "\u0430",  # Cyrillic a
    "x" * 129,
    "../../../../tmp/owned",
]


@pytest.mark.parametrize("hostile", HOSTILE_IDS, ids=lambda value: repr(value)[:20])
async def test_hostile_ids_are_rejected_and_nothing_is_touched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hostile: str
) -> None:
    data = tmp_path / "a" / "data"
    data.mkdir(parents=True)
    (data / "s1.jsonl").write_bytes(file_bytes(header("s1"), events_of(*closed_turn(1))))
    (tmp_path / "x.jsonl").write_bytes(b"outside\n")
    before = tree(tmp_path)
    spy = spy_os(monkeypatch)
    persistence = JsonlPersistence(data)
    with pytest.raises(ValueError, match="invalid session id"):
        persistence.path_of(hostile)
    for call in (persistence.load, persistence.delete, persistence.has):
        with pytest.raises(ValueError, match="invalid session id"):
            await call(hostile)
    assert spy.calls == []
    assert tree(tmp_path) == before


@pytest.mark.parametrize("fine", ["s", "a.b-c_D9", "x" * 128, ".hidden", "a..b"])
async def test_ordinary_ids_map_to_a_file_in_the_data_directory(tmp_path: Path, fine: str) -> None:
    persistence = JsonlPersistence(tmp_path)
    assert persistence.path_of(fine) == tmp_path / f"{fine}.jsonl"
    assert await persistence.has(fine) is False


async def test_a_session_with_an_unstorable_id_is_never_written(tmp_path: Path) -> None:
    data = tmp_path / "a" / "data"
    before = tree(tmp_path)
    async with lifetime(data) as ctx:
        session, detach = open_session(ctx, "../escape")  # ids made in-process are not client input
        session.append("turn/start", TURN_START)
        await ctx.sessions.flush(session)
        await detach()
    assert tree(tmp_path) == before | {"a": None, "a/data": None}  # only the data directory, made at start-up
    assert not (tmp_path / "escape.jsonl").exists()


# -- list ---------------------------------------------------------------------------------------------------


async def _write_session(ctx: Any, session_id: str, words: str | None, cwd: str | None = None) -> float:
    session, detach = open_session(ctx, session_id, meta={"cwd": cwd} if cwd else None)
    session.append("turn/start", TURN_START)
    if words is not None:
        session.append(
            "user/message", {"content": [*text(words), {"type": "image", "data": "x"}], "source": {"kind": "user"}}
        )
        session.append(
            "user/message", {"content": text("a later message is not the title"), "source": {"kind": "user"}}
        )
    await detach()
    return session.header.created_at


async def test_list_returns_sessions_newest_first_with_titles(tmp_path: Path) -> None:
    data = tmp_path / "data"
    long_words = "word " * 40
    async with lifetime(data) as ctx:
        created = {
            "old": await _write_session(ctx, "old", "  first\n\tquestion   here ", cwd="/w/old"),
            "mid": await _write_session(ctx, "mid", long_words),
            "new": await _write_session(ctx, "new", None),
        }
        os.utime(data / "old.jsonl", (1_000_000_000, 1_000_000_000))
        os.utime(data / "mid.jsonl", (1_500_000_000, 1_500_000_000))
        os.utime(data / "new.jsonl", (1_800_000_000, 1_800_000_000))
        # not sessions: a temporary, a hidden file and another suffix
        (data / ".s9.jsonl.123.tmp").write_bytes(b"partial")
        (data / ".hidden.jsonl").write_bytes(b"{}\n")
        (data / "notes.txt").write_bytes(b"hello\n")
        infos = await ctx.session_persistence.list()
    title = " ".join(long_words.split())[:79] + "…"
    assert len(title) == 80
    assert infos == [
        SessionInfo(id="new", cwd=None, created_at=created["new"], updated_at=1_800_000_000.0, title=None),
        SessionInfo(id="mid", cwd=None, created_at=created["mid"], updated_at=1_500_000_000.0, title=title),
        SessionInfo(
            id="old", cwd="/w/old", created_at=created["old"], updated_at=1_000_000_000.0, title="first question here"
        ),
    ]


async def test_list_updated_at_follows_the_last_write(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with lifetime(data) as ctx:
        a, _ = open_session(ctx, "a")
        b, _ = open_session(ctx, "b")
        for session in (a, b):
            session.append("turn/start", TURN_START)
            await ctx.sessions.flush(session)
        os.utime(data / "a.jsonl", (1_000, 1_000))
        os.utime(data / "b.jsonl", (2_000, 2_000))
        assert [info.id for info in await ctx.session_persistence.list()] == ["b", "a"]
        a.append("user/message", {"content": text("news"), "source": {"kind": "user"}})
        await ctx.sessions.flush(a)
        infos = await ctx.session_persistence.list()
        assert [info.id for info in infos] == ["a", "b"]
        assert infos[0].updated_at == (data / "a.jsonl").stat().st_mtime
        assert infos[0].title == "news"


async def test_list_of_a_missing_data_directory_is_empty(tmp_path: Path) -> None:
    assert await JsonlPersistence(tmp_path / "nowhere").list() == []
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"garbage\n",
        b'{"type":"not-a-session","id":"bad"}\n',
        b'{"type":"session"}\n',
        b"[1]\n",
        b'{"type":"session","version":1,"id":"bad","created_at":1}\n{"type":"user/message","seq":0,"data":[]}\n',
    ],
)
async def test_list_skips_an_unreadable_file_and_lists_the_rest(tmp_path: Path, content: bytes) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "bad.jsonl").write_bytes(content)
    (data / "good.jsonl").write_bytes(file_bytes(header("good"), events_of(*closed_turn(1))))
    infos = await JsonlPersistence(data).list()
    assert [info.id for info in infos] == ["good"]
    assert infos[0].title == "hello"


# -- delete and release -------------------------------------------------------------------------------------


async def test_delete_removes_the_file_and_is_silent_for_an_unknown_id(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    path = data / "s1.jsonl"
    path.write_bytes(file_bytes(header("s1"), events_of(*closed_turn(1))))
    (data / "s2.jsonl").write_bytes(file_bytes(header("s2"), events_of(*closed_turn(1))))
    persistence = JsonlPersistence(data)
    assert await persistence.has("s1") is True
    await persistence.delete("s1")
    assert not path.exists()
    assert await persistence.has("s1") is False
    await persistence.delete("s1")  # again: silent
    await persistence.delete("never-existed")
    assert sorted(p.name for p in data.iterdir()) == ["s2.jsonl"]
    with pytest.raises(SessionNotFoundError):
        await persistence.load("s1")


async def test_delete_removes_the_sessions_spilled_tool_output_only(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for session in ("s1", "s2"):
        (data / f"{session}.jsonl").write_bytes(file_bytes(header(session), events_of(*closed_turn(1))))
        spilled = data / "tool-output" / session
        spilled.mkdir(parents=True)
        (spilled / "call-1.txt").write_text("the whole output\n")
    persistence = JsonlPersistence(data)
    await persistence.delete("s1")
    assert not (data / "tool-output" / "s1").exists()
    assert (data / "tool-output" / "s2" / "call-1.txt").read_text() == "the whole output\n"


async def test_delete_closes_a_live_writer_first(tmp_path: Path) -> None:
    data = tmp_path / "data"
    path = data / "s1.jsonl"
    async with lifetime(data) as ctx:
        persistence: JsonlPersistence = ctx.session_persistence
        session, _ = open_session(ctx, "s1")
        session.append("turn/start", TURN_START)
        await ctx.sessions.flush(session)
        session.append("user/message", {"content": text("queued"), "source": {"kind": "user"}})  # still queued
        assert fds_open_to(path) != []
        await persistence.delete("s1")
        assert not path.exists()
        assert fds_open_to(path) == []  # the writer's descriptor (and its lock) is gone
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        await ctx.sessions.flush(session)
        for _ in range(10):
            await anyio.lowlevel.checkpoint()
        assert not path.exists()  # a deleted session is not resurrected by its late events
    assert not path.exists()
    assert list(data.iterdir()) == []


async def test_delete_of_a_loaded_session_releases_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    path = data / "s1.jsonl"
    path.write_bytes(file_bytes(header("s1"), events_of(*closed_turn(1))))
    persistence = JsonlPersistence(data)
    await persistence.load("s1")
    await persistence.delete("s1")
    assert not path.exists()
    assert fds_open_to(path) == []


async def test_release_closes_a_loaded_but_unused_session(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    path = data / "s1.jsonl"
    content = file_bytes(header("s1"), events_of(*closed_turn(1)))
    path.write_bytes(content)
    persistence = JsonlPersistence(data)
    first = await persistence.load("s1")
    assert len(fds_open_to(path)) == 1
    assert not lock_is_free(path)
    persistence.release("s1")
    assert fds_open_to(path) == []
    assert lock_is_free(path)
    assert path.read_bytes() == content
    second = await persistence.load("s1")  # loadable again, and the same
    assert second == first
    persistence.release("s1")
    persistence.release("s1")  # idempotent
    persistence.release("unknown")
    assert fds_open_to(path) == []


async def test_a_loaded_session_appends_after_its_stored_events(tmp_path: Path) -> None:
    """The seam ``resume`` uses: load, then a session seeded with the events goes live and appends."""
    data = tmp_path / "data"
    data.mkdir()
    path = data / "s1.jsonl"
    path.write_bytes(file_bytes(header("s1"), events_of(*open_turn(1))))
    async with lifetime(data) as ctx:
        loaded = await ctx.session_persistence.load("s1")
        session = ctx.sessions.prepare("s1", seed=loaded.events, meta={"created_at": loaded.header.created_at})
        ctx.sessions.enter(session)
        ctx.sessions.announce(session)
        session.append("turn/start", {"turn": 2, "trigger": {"kind": "message", "source": {"kind": "user"}}})
        await ctx.sessions.flush(session)
        on_disk = disk_events(path)
        assert on_disk == [event.to_json() for event in session.events]
        assert [line["seq"] for line in on_disk] == list(range(8))
        assert json.loads(path.read_bytes().split(b"\n")[0])["id"] == "s1"


async def test_a_seeded_session_stores_its_seed_once(tmp_path: Path) -> None:
    """A fork (a session seeded in-process, not loaded from this backend) writes its seed, then its own events."""
    data = tmp_path / "data"
    path = data / "fork.jsonl"
    seed = events_of(*closed_turn(1))
    async with lifetime(data) as ctx:
        session = ctx.sessions.create("fork", seed=seed, meta={"parent_session": "origin"})
        session.append("turn/start", {"turn": 2, "trigger": {"kind": "message", "source": {"kind": "user"}}})
        await ctx.sessions.flush(session)
        session.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
        expected = [event.to_json() for event in session.events]
    lines = lines_of(path)
    assert lines[0]["parent_session"] == "origin"
    assert lines[1:] == expected
    assert [line["seq"] for line in lines[1:]] == list(range(len(seed) + 2))
