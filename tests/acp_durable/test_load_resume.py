"""Durable sessions across daemon restarts: ``session/load`` (replay, then answer), ``session/resume`` (no replay),
the errors a client can act on, one writer per session file across daemons, and hostile session ids.

Every daemon runs on a data directory under the test's ``tmp_path``; each scenario ends its daemons with stdin EOF
and checks they exit 0 (see :func:`run_daemon`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError, text_block
from acp.schema import ResourceContentBlock

from tests.support.durable import (
    WAIT,
    assert_contiguous,
    read_session,
    request_error,
    run_daemon,
    session_path,
    turn_starts,
)

RESOURCE_NOT_FOUND = -32002
INVALID_PARAMS = -32602


def agent_text(updates: list[dict[str, Any]]) -> str:
    return "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk")


def split_by_user_chunks(updates: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """``[(user text, the updates that follow it up to the next user chunk)]``; nothing may precede the first."""
    turns: list[tuple[str, list[dict[str, Any]]]] = []
    for update in updates:
        if update["sessionUpdate"] == "user_message_chunk":
            turns.append((update["content"]["text"], []))
        else:
            assert turns, f"an update before any user_message_chunk: {update!r}"
            turns[-1][1].append(update)
    return turns


async def prompted_session(tmp_path: Path, data: Path, project: Path, texts: list[str]) -> tuple[str, list[Any]]:
    """A session created in a daemon (echo), prompted with *texts*, the daemon then closed; its id and the live
    updates of each prompt."""
    live: list[Any] = []
    async with run_daemon(tmp_path, data, name="writer") as daemon:
        session_id = await daemon.start(project)
        for text in texts:
            mark = daemon.mark()
            response = await daemon.prompt(session_id, text)
            assert response.stop_reason == "end_turn"
            live.append(daemon.updates_in(mark, session_id=session_id))
        assert await daemon.close_stdin() == 0
    return session_id, live


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


async def test_initialize_advertises_durable_sessions(tmp_path: Path, data: Path) -> None:
    async with run_daemon(tmp_path, data) as daemon:
        response = await daemon.initialize()
    capabilities = response.agent_capabilities
    assert capabilities is not None
    assert capabilities.load_session is True
    sessions = capabilities.session_capabilities
    assert sessions is not None
    assert sessions.list is not None
    assert sessions.resume is not None
    assert sessions.close is not None
    assert sessions.delete is not None


async def test_restart_between_turns_then_load_replays_and_continues(tmp_path: Path, data: Path, project: Path) -> None:
    texts = ["first question about the parser", "and a second one, please"]
    session_id, live = await prompted_session(tmp_path, data, project, texts)
    _, before = read_session(data, session_id)
    assert turn_starts(before) == [1, 2]

    async with run_daemon(tmp_path, data, name="reader") as daemon:
        init = await daemon.initialize()
        assert init.agent_capabilities is not None and init.agent_capabilities.load_session is True
        mark = daemon.mark()
        await daemon.load(session_id, project)
        answered = daemon.response_index("session/load", mark)
        await daemon.client.settled()
        replay = daemon.updates_in(mark, session_id=session_id)
        # Everything replayed came before the answer to session/load.
        assert daemon.updates_in(mark, answered, session_id) == replay
        assert daemon.updates_in(answered) == []
        # What the client's session_update saw is what went over the wire.
        assert [u for s, u in daemon.client.updates if s == session_id] == replay
        # The replay reproduces the conversation: each prompt as a user chunk, then the agent's answer.
        turns = split_by_user_chunks(replay)
        assert [text for text, _ in turns] == texts
        for (text, updates), live_updates in zip(turns, live, strict=True):
            assert agent_text(updates) == text  # the echo model answered each prompt with its text
            assert updates == [u for u in live_updates if u["sessionUpdate"] != "session_info_update"]
        assert all(u["sessionUpdate"] != "session_info_update" for u in replay)

        # The next prompt continues the conversation.
        mark = daemon.mark()
        response = await daemon.prompt(session_id, "third")
        assert response.stop_reason == "end_turn"
        fresh = daemon.updates_in(mark, session_id=session_id)
        assert agent_text(fresh) == "third"
        assert {u["sessionUpdate"] for u in fresh} == {"agent_message_chunk"}, "no replay, no new title"
        assert {u["messageId"] for u in fresh} == {"m3.1"}
        assert await daemon.close_stdin() == 0

    header, events = read_session(data, session_id)
    assert header["id"] == session_id and header["cwd"] == str(project)
    assert_contiguous(events)
    assert events[: len(before)] == before, "loading rewrote the stored history"
    assert turn_starts(events) == [1, 2, 3]
    assert events[-1]["type"] == "turn/end"
    assert events[-1]["data"] == {"turn": 3, "reason": {"kind": "completed"}}


async def test_resume_does_not_replay_and_continues(tmp_path: Path, data: Path, project: Path) -> None:
    session_id, _ = await prompted_session(tmp_path, data, project, ["alpha beta"])

    async with run_daemon(tmp_path, data, name="resumer") as daemon:
        await daemon.initialize()
        mark = daemon.mark()
        assert await daemon.resume(session_id, project) is not None
        answered = daemon.response_index("session/resume", mark)
        assert daemon.updates_in(mark) == [], "session/resume replayed updates"
        mark = daemon.mark()
        response = await daemon.prompt(session_id, "gamma delta")
        assert response.stop_reason == "end_turn"
        updates = daemon.updates_in(answered)
        assert updates == daemon.updates_in(mark), "updates arrived between the resume answer and the prompt"
        assert agent_text(updates) == "gamma delta"
        assert {u["sessionUpdate"] for u in updates} == {"agent_message_chunk"}
        assert {u["messageId"] for u in updates} == {"m2.1"}

    _, events = read_session(data, session_id)
    assert_contiguous(events)
    assert turn_starts(events) == [1, 2]
    assert events[-1]["data"] == {"turn": 2, "reason": {"kind": "completed"}}


@pytest.mark.parametrize("method", ["load", "resume"])
async def test_unknown_session_is_resource_not_found(tmp_path: Path, data: Path, project: Path, method: str) -> None:
    async with run_daemon(tmp_path, data) as daemon:
        await daemon.initialize()
        with pytest.raises(RequestError) as raised:
            await getattr(daemon, method)("no-such-session", project)
        error = request_error(raised)
        assert error.code == RESOURCE_NOT_FOUND
        assert isinstance(error.data, dict) and error.data.get("sessionId") == "no-such-session"
    assert stored_names(data) == [], "a failed load stored something"


@pytest.mark.parametrize("method", ["load", "resume"])
async def test_cwd_mismatch_and_relative_cwd_are_invalid_params(
    tmp_path: Path, data: Path, project: Path, method: str
) -> None:
    session_id, _ = await prompted_session(tmp_path, data, project, ["hello"])
    stored = session_path(data, session_id).read_bytes()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    async with run_daemon(tmp_path, data) as daemon:
        await daemon.initialize()
        call = getattr(daemon, method)
        with pytest.raises(RequestError) as raised:
            await call(session_id, elsewhere)
        assert request_error(raised).code == INVALID_PARAMS
        with pytest.raises(RequestError) as raised:
            await call(session_id, "project")
        assert request_error(raised).code == INVALID_PARAMS
        assert session_path(data, session_id).read_bytes() == stored
        # The refusals left nothing open or locked: the right directory works in the same daemon.
        await call(session_id, project)
        response = await daemon.prompt(session_id, "again")
        assert response.stop_reason == "end_turn"


@pytest.mark.parametrize("holder", ["created", "loaded"])
async def test_second_daemon_cannot_load_a_live_session(tmp_path: Path, data: Path, project: Path, holder: str) -> None:
    if holder == "loaded":
        session_id, _ = await prompted_session(tmp_path, data, project, ["stored earlier"])
    async with run_daemon(tmp_path, data, name="A") as first:
        await first.initialize()
        if holder == "loaded":
            await first.load(session_id, project)
        else:
            session_id = await first.new_session(project)
        assert (await first.prompt(session_id, "live in A")).stop_reason == "end_turn"
        path = session_path(data, session_id)
        stored = path.read_bytes()
        stat = path.stat()

        async with run_daemon(tmp_path, data, name="B") as second:
            await second.initialize()
            for method in ("load", "resume"):
                mark = second.mark()
                with pytest.raises(RequestError) as raised:
                    await getattr(second, method)(session_id, project)
                error = request_error(raised)
                assert error.code == RESOURCE_NOT_FOUND, (method, error.code, str(error))
                assert isinstance(error.data, dict)
                assert error.data.get("reason") == "locked"
                assert error.data.get("sessionId") == session_id
                assert second.updates_in(mark) == [], f"{method} of a locked session sent updates"
                assert path.read_bytes() == stored
                assert (path.stat().st_size, path.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)

            # A still owns it and keeps working.
            assert (await first.prompt(session_id, "still A")).stop_reason == "end_turn"
            assert await first.close_stdin() == 0

            # Once A is gone, B can load it: the whole conversation, A's last turn included.
            mark = second.mark()
            await second.load(session_id, project)
            texts = [
                u["content"]["text"] for u in second.updates_in(mark) if u["sessionUpdate"] == "user_message_chunk"
            ]
            assert texts[-2:] == ["live in A", "still A"]
            assert (await second.prompt(session_id, "now in B")).stop_reason == "end_turn"

    _, events = read_session(data, session_id)
    assert_contiguous(events)
    expected_turns = [1, 2, 3, 4] if holder == "loaded" else [1, 2, 3]
    assert turn_starts(events) == expected_turns


HOSTILE_IDS = [
    "../x",
    "/etc/passwd",
    "%2e%2e%2f",
    "\x00",
    "abc\x00def",
    "a" * 10_000,
    "",
    "..",
    ".",
    "sub/dir",
]


def snapshot(root: Path, data: Path) -> dict[str, Any]:
    """Every path under *root* (names), with the bytes of every file in the data directory."""
    listing: dict[str, Any] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            relative = str(path.relative_to(root))
            listing[relative] = path.read_bytes() if path.is_file() and path.parent == data else None
    return listing


def outside_state() -> tuple[int, bool, bool]:
    """What a path escape would change outside the test's directory: /etc/passwd, /etc/passwd.jsonl, /x.jsonl."""
    return (Path("/etc/passwd").stat().st_mtime_ns, Path("/etc/passwd.jsonl").exists(), Path("/x.jsonl").exists())


def stored_names(data: Path) -> list[str]:
    return sorted(path.name for path in data.iterdir()) if data.exists() else []


@pytest.mark.parametrize("method", ["load", "resume", "delete"])
async def test_hostile_ids_are_invalid_params_and_touch_nothing(
    tmp_path: Path, data: Path, project: Path, method: str
) -> None:
    async with run_daemon(tmp_path, data) as daemon:
        session_id = await daemon.start(project)
        assert (await daemon.prompt(session_id, "a real session")).stop_reason == "end_turn"
        assert await daemon.close_session(session_id) is not None
        before = snapshot(tmp_path, data)
        passwd = outside_state()

        for hostile in HOSTILE_IDS:
            with pytest.raises(RequestError) as raised:
                if method == "delete":
                    await daemon.delete(hostile)
                else:
                    await getattr(daemon, method)(hostile, project)
            error = request_error(raised)
            assert error.code == INVALID_PARAMS, (hostile[:20], error.code, str(error))

        assert snapshot(tmp_path, data) == before
        assert outside_state() == passwd
        # The daemon is unharmed and the real session is intact.
        await daemon.load(session_id, project)
        assert (await daemon.prompt(session_id, "still fine")).stop_reason == "end_turn"


async def test_replay_gives_back_the_prompts_content_blocks(tmp_path: Path, data: Path, project: Path) -> None:
    link = ResourceContentBlock(type="resource_link", name="main.py", uri="file:///work/project/main.py")
    async with run_daemon(tmp_path, data, name="writer") as daemon:
        session_id = await daemon.start(project)
        with anyio.fail_after(WAIT):
            response = await daemon.conn.prompt(session_id=session_id, prompt=[text_block("look at"), link])
        assert response.stop_reason == "end_turn"
    async with run_daemon(tmp_path, data, name="reader") as daemon:
        await daemon.initialize()
        mark = daemon.mark()
        await daemon.load(session_id, project)
        user = [u["content"] for u in daemon.updates_in(mark) if u["sessionUpdate"] == "user_message_chunk"]
    assert user == [
        {"type": "text", "text": "look at"},
        {"type": "resource_link", "name": "main.py", "uri": "file:///work/project/main.py"},
    ]
