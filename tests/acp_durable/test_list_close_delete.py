"""``session/list`` (cwd filter, titles, ``updatedAt``, newest first, cursor pagination), ``session/close`` (cancel,
free, loadable again), ``session/delete`` (close, remove the file; unknown ids succeed) and the one
``session_info_update`` a new session gets when its first prompt sets its title.
"""

from __future__ import annotations

import os
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError
from acp.schema import PromptResponse

from dsh.plugins.persistence._format import encode_event, encode_header
from dsh.services.sessions import SessionEvent, SessionHeader
from tests.support.durable import (
    Daemon,
    assert_contiguous,
    read_session,
    request_error,
    run_daemon,
    session_path,
    turn_starts,
    write_script,
)

RESOURCE_NOT_FOUND = -32002
INVALID_PARAMS = -32602
PAGE = 50


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


def directory(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.mkdir()
    return path


def parse_iso(value: str | None) -> datetime:
    assert isinstance(value, str), value
    parsed = datetime.fromisoformat(value)
    assert parsed.tzinfo is not None, f"updatedAt {value!r} has no time zone"
    return parsed


def newest_first(data: Path, ids: list[str]) -> list[str]:
    """The listing order the files' modification times call for (newest first, ties by id)."""
    return sorted(ids, key=lambda i: (-session_path(data, i).stat().st_mtime, i))


def info_updates(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [u for u in updates if u["sessionUpdate"] == "session_info_update"]


# -- session/list ---------------------------------------------------------------------------------------------


async def test_list_is_empty_at_first(tmp_path: Path, data: Path) -> None:
    async with run_daemon(tmp_path, data) as daemon:
        await daemon.initialize()
        for cwd in (None, tmp_path):
            listed = await daemon.list(cwd)
            assert listed.sessions == []
            assert listed.next_cursor is None
        # A session that was created but never prompted has nothing stored, so it is not listed either.
        await daemon.new_session(tmp_path)
        assert (await daemon.list()).sessions == []


async def test_list_filters_by_cwd_with_titles_and_newest_first(tmp_path: Path, data: Path) -> None:
    left, right = directory(tmp_path, "left"), directory(tmp_path, "right")
    async with run_daemon(tmp_path, data) as daemon:
        await daemon.initialize()
        first = await daemon.new_session(left)
        second = await daemon.new_session(left)
        third = await daemon.new_session(right)
        titles = {first: "Fix the parser please", second: "second thread", third: "over on the right"}
        prompts = [
            (first, "  Fix   the parser\n please "),
            (second, "second thread"),
            (third, "over on the right"),
            (second, "a later message does not retitle"),
            (first, "neither does this one"),
        ]
        for session_id, text in prompts:
            assert (await daemon.prompt(session_id, text)).stop_reason == "end_turn"

        everything = await daemon.list()
        assert everything.next_cursor is None
        listed = everything.sessions
        assert [s.session_id for s in listed] == newest_first(data, [first, second, third])
        for info in listed:
            assert info.title == titles[info.session_id]
            assert info.cwd == str(right if info.session_id == third else left)
            updated = parse_iso(info.updated_at)
            assert abs(updated.timestamp() - session_path(data, info.session_id).stat().st_mtime) < 1e-3

        on_left = await daemon.list(left)
        assert [s.session_id for s in on_left.sessions] == newest_first(data, [first, second])
        assert on_left.next_cursor is None
        on_right = await daemon.list(right)
        assert [s.session_id for s in on_right.sessions] == [third]
        assert (await daemon.list(tmp_path / "nowhere")).sessions == []
        with pytest.raises(RequestError) as raised:
            await daemon.list("left")
        assert request_error(raised).code == INVALID_PARAMS


def stored_mtimes(data: Path) -> dict[str, float]:
    """``{session id: modification time}`` of every file in the data directory."""
    return {path.name.removesuffix(".jsonl"): path.stat().st_mtime for path in data.iterdir()}


def write_stored_session(data: Path, session_id: str, cwd: Path, title: str, mtime: float) -> None:
    """A session file written directly in the stored format: one completed turn whose prompt is *title*."""
    header = SessionHeader(id=session_id, created_at=mtime - 10, cwd=str(cwd))
    events = [
        ("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user", "message_id": "m"}}}),
        ("user/message", {"content": [{"type": "text", "text": title}], "source": {"kind": "user", "message_id": "m"}}),
        ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
    ]
    lines = [encode_header(header)] + [
        encode_event(SessionEvent(t, i, mtime - 5, d)) for i, (t, d) in enumerate(events)
    ]
    data.mkdir(exist_ok=True)
    path = session_path(data, session_id)
    path.write_bytes(b"".join(lines))
    os.utime(path, (mtime, mtime))


async def test_list_paginates_by_fifty_newest_first(tmp_path: Path, data: Path) -> None:
    left, right = directory(tmp_path, "left"), directory(tmp_path, "right")
    base = time.time() - 100_000
    expected_left = []
    for n in range(55):
        session_id = f"stored-{n:02d}"
        write_stored_session(data, session_id, left, f"Session number {n:02d}", base + 100 * n)
        expected_left.append(session_id)
    expected_left.reverse()  # newest first
    expected_right = []
    for n in range(3):
        session_id = f"right-{n}"
        write_stored_session(data, session_id, right, f"Right {n}", base + 50 + 1000 * n)
        expected_right.append(session_id)
    expected_right.reverse()
    mtimes = stored_mtimes(data)

    async with run_daemon(tmp_path, data) as daemon:
        await daemon.initialize()
        first = await daemon.list(left)
        assert len(first.sessions) == PAGE
        assert first.next_cursor is not None
        second = await daemon.list(left, first.next_cursor)
        assert len(second.sessions) == 5
        assert second.next_cursor is None
        pages = first.sessions + second.sessions
        assert [s.session_id for s in pages] == expected_left
        for info in pages:
            assert info.title == f"Session number {info.session_id[-2:]}"
            assert abs(parse_iso(info.updated_at).timestamp() - mtimes[info.session_id]) < 1e-3

        only_right = await daemon.list(right)
        assert [s.session_id for s in only_right.sessions] == expected_right
        assert only_right.next_cursor is None

        every = await daemon.list()
        assert len(every.sessions) == PAGE and every.next_cursor is not None
        rest = await daemon.list(None, every.next_cursor)
        assert rest.next_cursor is None
        assert [s.session_id for s in every.sessions + rest.sessions] == sorted(mtimes, key=lambda i: -mtimes[i])

        for cursor in ("not-a-cursor", "-1", "1.5", ""):
            with pytest.raises(RequestError) as raised:
                await daemon.list(left, cursor)
            assert request_error(raised).code == INVALID_PARAMS, cursor

        # The files written here are real sessions: one loads and replays its prompt.
        mark = daemon.mark()
        await daemon.load("stored-07", left)
        assert [u["content"]["text"] for u in daemon.updates_in(mark)] == ["Session number 07"]


# -- session/close ----------------------------------------------------------------------------------------------


async def test_close_cancels_a_running_prompt_then_the_session_can_be_loaded_again(tmp_path: Path, data: Path) -> None:
    project = directory(tmp_path, "project")
    slow = " ".join(f"word{n}" for n in range(400))
    model = write_script(tmp_path / "script.json", [{"text": slow, "delay": 0.05}, {"text": "back again"}])
    async with run_daemon(tmp_path, data, model=model) as daemon:
        session_id = await daemon.start(project)
        outcome: list[PromptResponse | Exception] = []

        async def prompt() -> None:
            try:
                outcome.append(await daemon.prompt(session_id, "work slowly"))
            except Exception as exc:
                outcome.append(exc)

        async with anyio.create_task_group() as group:
            group.start_soon(prompt)
            await daemon.client.wait_until(
                lambda: any(u["sessionUpdate"] == "agent_message_chunk" for _, u in daemon.client.updates),
                "the first chunk of the slow answer",
            )
            mark = daemon.mark()
            assert await daemon.close_session(session_id) is not None
            closed = daemon.response_index("session/close", mark)
        assert len(outcome) == 1 and isinstance(outcome[0], PromptResponse), outcome
        assert outcome[0].stop_reason == "cancelled"

        with pytest.raises(RequestError) as raised:
            await daemon.prompt(session_id, "are you there?")
        error = request_error(raised)
        assert error.code == RESOURCE_NOT_FOUND and isinstance(error.data, dict)
        assert error.data.get("sessionId") == session_id
        assert daemon.updates_in(closed, session_id=session_id) == [], "updates after the close was answered"

        # Closed, not gone: the same daemon loads it again and it continues.
        _, stored = read_session(data, session_id)
        assert stored[-1]["type"] == "turn/end"
        assert stored[-1]["data"]["reason"]["kind"] in ("aborted", "disposed")
        mark = daemon.mark()
        await daemon.load(session_id, project)
        replay = daemon.updates_in(mark, session_id=session_id)
        assert replay[0]["sessionUpdate"] == "user_message_chunk"
        assert replay[0]["content"]["text"] == "work slowly"
        assert all(u["sessionUpdate"] == "agent_message_chunk" for u in replay[1:])
        assert slow.startswith("".join(u["content"]["text"] for u in replay[1:]))
        response = await daemon.prompt(session_id, "and now?")
        assert response.stop_reason == "end_turn"

    _, events = read_session(data, session_id)
    assert_contiguous(events)
    assert turn_starts(events) == [1, 2]
    assert events[-1]["data"] == {"turn": 2, "reason": {"kind": "completed"}}


# -- session/delete -----------------------------------------------------------------------------------------------


async def test_delete_removes_the_file_and_unknown_ids_succeed(tmp_path: Path, data: Path) -> None:
    project = directory(tmp_path, "project")
    async with run_daemon(tmp_path, data, name="first") as daemon:
        await daemon.initialize()
        open_one = await daemon.new_session(project)
        kept = await daemon.new_session(project)
        for session_id in (open_one, kept):
            assert (await daemon.prompt(session_id, "hello")).stop_reason == "end_turn"
        assert session_path(data, open_one).exists()

        # Deleting a session that is open here closes it and removes its file.
        assert await daemon.delete(open_one) == {}
        assert not session_path(data, open_one).exists()
        with pytest.raises(RequestError) as raised:
            await daemon.prompt(open_one, "gone?")
        assert request_error(raised).code == RESOURCE_NOT_FOUND
        with pytest.raises(RequestError) as raised:
            await daemon.load(open_one, project)
        error = request_error(raised)
        assert error.code == RESOURCE_NOT_FOUND and isinstance(error.data, dict)
        assert error.data.get("sessionId") == open_one
        # Deleting it again, or an id that never existed, succeeds silently.
        assert await daemon.delete(open_one) == {}
        assert await daemon.delete("never-existed") == {}
        assert [s.session_id for s in (await daemon.list()).sessions] == [kept]

    async with run_daemon(tmp_path, data, name="second") as daemon:
        await daemon.initialize()
        # A stored session that is not open anywhere.
        assert await daemon.delete(kept) == {}
        assert not session_path(data, kept).exists()
        with pytest.raises(RequestError) as raised:
            await daemon.load(kept, project)
        assert request_error(raised).code == RESOURCE_NOT_FOUND
        assert (await daemon.list()).sessions == []
    assert stored_mtimes(data) == {}


async def _live_in_a(tmp_path: Path, data: Path, a: Daemon, project: Path) -> tuple[str, bytes]:
    session_id = await a.start(project)
    assert (await a.prompt(session_id, "mine")).stop_reason == "end_turn"
    return session_id, session_path(data, session_id).read_bytes()


async def test_delete_from_another_daemon_leaves_a_live_session_alone(tmp_path: Path, data: Path) -> None:
    project = directory(tmp_path, "project")
    async with run_daemon(tmp_path, data, name="A") as first:
        session_id, stored = await _live_in_a(tmp_path, data, first, project)
        async with run_daemon(tmp_path, data, name="B", allow_errors=True) as second:
            await second.initialize()
            with pytest.raises(RequestError):
                await second.delete(session_id)
            assert session_path(data, session_id).read_bytes() == stored
        assert (await first.prompt(session_id, "still mine")).stop_reason == "end_turn"


async def test_delete_from_another_daemon_is_a_clear_locked_error(tmp_path: Path, data: Path) -> None:
    project = directory(tmp_path, "project")
    async with run_daemon(tmp_path, data, name="A") as first:
        session_id, _ = await _live_in_a(tmp_path, data, first, project)
        async with run_daemon(tmp_path, data, name="B", allow_errors=True) as second:
            await second.initialize()
            with pytest.raises(RequestError) as raised:
                await second.delete(session_id)
            error = request_error(raised)
            assert error.code == RESOURCE_NOT_FOUND, (error.code, str(error))
            assert isinstance(error.data, dict) and error.data.get("reason") == "locked"


# -- session_info_update ------------------------------------------------------------------------------------------


async def test_session_info_update_is_sent_once_on_the_first_prompt(tmp_path: Path, data: Path) -> None:
    project = directory(tmp_path, "project")
    long_text = "word " * 40
    async with run_daemon(tmp_path, data) as daemon:
        await daemon.initialize()
        session_id = await daemon.new_session(project)
        mark = daemon.mark()
        assert (await daemon.prompt(session_id, "  Hello   wide\n world  ")).stop_reason == "end_turn"
        first = daemon.updates_in(mark, session_id=session_id)
        infos = info_updates(first)
        assert len(infos) == 1, first
        assert first[0] == infos[0], "the title comes before the answer"
        assert infos[0]["title"] == "Hello wide world"
        parse_iso(infos[0].get("updatedAt"))
        # The client's session_update saw the same notification.
        assert [
            u for s, u in daemon.client.updates if s == session_id and u["sessionUpdate"] == "session_info_update"
        ] == infos

        for text in ("a second prompt", "a third"):
            mark = daemon.mark()
            assert (await daemon.prompt(session_id, text)).stop_reason == "end_turn"
            assert info_updates(daemon.updates_in(mark)) == []

        # Every new session gets its own, and a long first prompt makes the same title as session/list shows.
        other = await daemon.new_session(project)
        mark = daemon.mark()
        assert (await daemon.prompt(other, long_text)).stop_reason == "end_turn"
        infos = info_updates(daemon.updates_in(mark, session_id=other))
        assert len(infos) == 1
        assert infos[0]["title"] == " ".join(long_text.split())[:79] + "…"
        listed = {s.session_id: s.title for s in (await daemon.list(project)).sessions}
        assert listed == {session_id: "Hello wide world", other: infos[0]["title"]}
