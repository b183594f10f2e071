"""#10 items 1, 2, 3: nothing a client or a model sends leaves a session file unloadable, a write that fails is
never reported as success, and a session exists on disk from ``session/new`` on.

Every scenario runs real daemons (the official SDK client over pipes, see :mod:`tests.support.durable`) on a
data directory under the test's ``tmp_path``; storage faults are injected with the daemon-side plugin of
:mod:`tests.support.faults` (always runs) or by a real tmpfs that fills up (where mounting is allowed).
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError

from tests.support.durable import (
    assert_contiguous,
    read_session,
    request_error,
    run_daemon,
    session_path,
    turn_starts,
)
from tests.support.env import write_script
from tests.support.faults import DISK_FULL_PLUGIN, FILL, FREE

INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
DEEP = 970
"""As deep as the stress run went: the stdlib parser still accepts it, every encoder after it did not."""
SECRET = "the-prompt-text-must-never-be-logged"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


def nested(depth: int) -> str:
    """JSON text of an object nested *depth* levels deep (built as text: no recursion in the test)."""
    return '{"a":' * depth + "1" + "}" * depth


def balanced_turns(events: list[dict[str, Any]]) -> list[tuple[int, str]]:
    """``[(turn, end reason kind)]``; asserts every turn/start has its turn/end."""
    ends: list[tuple[int, str]] = []
    open_turn: int | None = None
    for event in events:
        if event["type"] == "turn/start":
            assert open_turn is None
            open_turn = event["data"]["turn"]
        elif event["type"] == "turn/end":
            assert event["data"]["turn"] == open_turn
            ends.append((open_turn, event["data"]["reason"]["kind"]))
            open_turn = None
    assert open_turn is None, "a turn is left open"
    return ends


# -- item 1: deep JSON -----------------------------------------------------------------------------------------


async def test_a_deep_prompt_is_refused_and_the_session_stays_loadable(
    tmp_path: Path, data: Path, project: Path
) -> None:
    """A prompt whose resource link carries ``_meta`` nested 970 deep: -32602 naming the problem, nothing
    logged for it, the session goes on, and it loads in another daemon afterwards."""
    async with run_daemon(tmp_path, data, name="first") as daemon:
        session_id = await daemon.start(project)
        link = (
            '{"type":"resource_link","uri":"file:///x","name":"x","_meta":' + nested(DEEP) + "}"
        )  # sent as raw text: the SDK's encoder would fail on it first
        frame = (
            '{"jsonrpc":"2.0","id":"deep-1","method":"session/prompt","params":{"sessionId":'
            + json.dumps(session_id)
            + ',"prompt":['
            + link
            + "]}}\n"
        )
        assert daemon.process.stdin is not None
        daemon.process.stdin.write(frame.encode())
        await daemon.client.wait_until(
            lambda: any(m.get("id") == "deep-1" for d, m in daemon.client.wire if d == "in"), "the deep prompt's answer"
        )
        answer = next(m for d, m in daemon.client.wire if d == "in" and m.get("id") == "deep-1")
        assert answer["error"]["code"] == INVALID_PARAMS
        assert "nested deeper than 128 levels" in answer["error"]["message"]
        response = await daemon.prompt(session_id, "after the deep one")
        assert response.stop_reason == "end_turn"
    _, events = read_session(data, session_id)
    assert_contiguous(events)
    assert turn_starts(events) == [1]  # the refused prompt never became a turn
    async with run_daemon(tmp_path, data, name="second") as daemon:
        await daemon.initialize()
        await daemon.load(session_id, project)
        response = await daemon.prompt(session_id, "and after a restart")
        assert response.stop_reason == "end_turn"


async def test_deep_tool_arguments_are_an_error_result_and_the_turn_goes_on(
    tmp_path: Path, data: Path, project: Path
) -> None:
    """A model's tool call with arguments nested 990 deep: the call is answered with an error tool result (the
    tool never runs), the turn goes on to the model's next step and ends ``end_turn``; the session loads and
    replays afterwards."""
    model = write_script(
        tmp_path / "deep.json",
        [
            {"tool_calls": [{"name": "read_file", "arguments": "[" * 990 + "]" * 990, "id": "deep"}]},
            {"text": "recovered"},
        ],
    )
    async with run_daemon(tmp_path, data, model=model, name="first") as daemon:
        session_id = await daemon.start(project)
        mark = daemon.mark()
        response = await daemon.prompt(session_id, "call it")
        assert response.stop_reason == "end_turn"
        updates = daemon.updates_in(mark, session_id=session_id)
        results = [u for u in updates if u["sessionUpdate"] == "tool_call_update" and u["toolCallId"] == "deep"]
        assert [u["status"] for u in results] == ["failed"]
        assert "nested deeper than 128 levels" in json.dumps(results[0]["content"])
    _, events = read_session(data, session_id)
    assert_contiguous(events)
    assert balanced_turns(events) == [(1, "completed")]
    result = next(e for e in events if e["type"] == "tool/result")
    assert result["data"]["is_error"] is True
    assert result["data"]["error"]["code"] == "INVALID_ARGUMENTS"
    async with run_daemon(tmp_path, data, name="second") as daemon:
        await daemon.initialize()
        mark = daemon.mark()
        await daemon.load(session_id, project)
        replayed = daemon.updates_in(mark, session_id=session_id)
        call = next(u for u in replayed if u["sessionUpdate"] == "tool_call")
        assert isinstance(call["rawInput"], str)  # too deep to pass on as JSON: shown as the model wrote it


# -- item 2: writes that fail -----------------------------------------------------------------------------------


async def test_a_full_disk_fails_the_turn_keeps_the_file_loadable_and_the_session_continues(
    tmp_path: Path, data: Path, project: Path
) -> None:
    """ENOSPC mid-session (injected at the backend's write and fsync): the prompt is answered -32603 naming the
    problem, never ``end_turn``; the file keeps exactly what was durable; one log line per failure, no traceback,
    no prompt text; once the disk frees up the next turn saves everything and the session loads whole."""
    async with run_daemon(tmp_path, data, plugins=[DISK_FULL_PLUGIN], name="first") as daemon:
        session_id = await daemon.start(project)
        assert (await daemon.prompt(session_id, "before")).stop_reason == "end_turn"
        durable: list[bytes] = []
        for words in (f"{FILL} {SECRET}", f"still full {SECRET}"):  # each failed turn is retried by the next
            with pytest.raises(RequestError) as caught:
                await daemon.prompt(session_id, words)
            error = request_error(caught)
            assert error.code == INTERNAL_ERROR
            assert "No space left on device" in str(error)
            # cut back to what was durable: turn 1, whole, and nothing of the failed turns
            _, events = read_session(data, session_id)
            assert_contiguous(events)
            assert balanced_turns(events) == [(1, "completed")] and turn_starts(events) == [1]
            durable.append(session_path(data, session_id).read_bytes())
        assert durable[0] == durable[1]
        assert (await daemon.prompt(session_id, f"{FREE} after")).stop_reason == "end_turn"
        stderr = daemon.stderr()
    failures = [line for line in stderr.splitlines() if "session/flush failed" in line]
    assert len(failures) == 2, stderr
    assert "Traceback" not in stderr and SECRET not in stderr
    _, events = read_session(data, session_id)
    assert_contiguous(events)
    assert [(turn, kind) for turn, kind in balanced_turns(events)] == [
        (1, "completed"),
        (2, "error"),
        (3, "error"),
        (4, "completed"),
    ]
    errors = [e["data"] for e in events if e["type"] == "error"]
    assert len(errors) == 2 and all(e["code"] == "SESSION_WRITE_FAILED" for e in errors)
    async with run_daemon(tmp_path, data, name="second") as daemon:
        await daemon.initialize()
        await daemon.load(session_id, project)
        assert (await daemon.prompt(session_id, "and on")).stop_reason == "end_turn"


def _mount_tmpfs(where: Path, size: str) -> str | None:
    """Mount a small tmpfs at *where*; the reason it cannot be done, or None."""
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    where.mkdir(parents=True)
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True, check=False
    )
    if result.returncode != 0:
        return f"mount -t tmpfs is not allowed here: {result.stderr.decode(errors='replace').strip()[:200]}"
    return None


def _fill(directory: Path) -> Path:
    """Fill the file system of *directory* to the last byte; return the filler file."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for size in (65536, 4096, 1):
            try:
                while True:
                    os.write(fd, b"x" * size)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return filler


async def test_a_data_directory_on_a_tmpfs_that_fills_up(tmp_path: Path, project: Path) -> None:
    """The same promise on a real full file system: a small tmpfs as the data directory, filled while the
    session lives. Skipped (with the reason) where mounting is not allowed."""
    mount = tmp_path / "small"
    reason = _mount_tmpfs(mount, "1m")
    if reason is not None:
        pytest.skip(reason)
    data = mount / "data"
    try:
        async with run_daemon(tmp_path, data, name="first") as daemon:
            session_id = await daemon.start(project)
            assert (await daemon.prompt(session_id, "before")).stop_reason == "end_turn"
            assert (await daemon.prompt(session_id, "before, again")).stop_reason == "end_turn"  # turn 1 synced
            filler = _fill(mount)
            with pytest.raises(RequestError) as caught:
                await daemon.prompt(session_id, "on a full disk " + "y" * 20000)
            assert request_error(caught).code == INTERNAL_ERROR
            assert "No space left on device" in str(request_error(caught))
            # what was durable, and nothing of the failed turn (turn 2's last flush may have met the full disk
            # too: then its turn/end is missing, which a load repairs)
            _, events = read_session(data, session_id)
            assert_contiguous(events)
            assert turn_starts(events) == [1, 2]
            filler.unlink()
            assert (await daemon.prompt(session_id, "after")).stop_reason == "end_turn"
            assert "Traceback" not in daemon.stderr()
        _, events = read_session(data, session_id)
        assert_contiguous(events)
        assert balanced_turns(events) == [(1, "completed"), (2, "completed"), (3, "error"), (4, "completed")]
        async with run_daemon(tmp_path, data, name="second") as daemon:
            await daemon.initialize()
            await daemon.load(session_id, project)
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.run_process(["umount", "-l", str(mount)], check=False)


@pytest.mark.parametrize("kind", ["regular file", "under /proc"])
async def test_a_data_directory_that_cannot_hold_sessions(tmp_path: Path, project: Path, kind: str) -> None:
    """``--data-dir`` (here ``DSH_DATA_DIR``) a regular file, or somewhere nothing can be created: one clear
    stderr line at start-up, ``initialize`` still works, every session call answers an error naming the
    directory and the setting, and the daemon exits 0 when the editor hangs up."""
    if kind == "regular file":
        data = tmp_path / "not-a-directory"
        data.write_text("in the way")
    else:
        data = Path("/proc/self/dsh-sessions")
    async with run_daemon(tmp_path, data) as daemon:
        response = await daemon.initialize()
        assert response.protocol_version == 1
        errors = []
        for call in (
            daemon.new_session(project),
            daemon.load("some-session", project),
            daemon.list(),
        ):
            with pytest.raises(RequestError) as caught:
                await call
            errors.append(request_error(caught))
        for error in errors:
            assert error.code == INTERNAL_ERROR
            assert str(data) in str(error) and "--data-dir" in str(error)
            assert isinstance(error.data, dict) and error.data.get("reason") == "storage"
        stderr = daemon.stderr()
    lines = [line for line in stderr.splitlines() if str(data) in line]
    assert len(lines) == 1 and lines[0].startswith("dsh acp: cannot store sessions in"), stderr
    if kind == "regular file":
        assert data.read_text() == "in the way"


# -- item 3: a session exists from session/new on ---------------------------------------------------------------


async def test_a_session_created_but_never_prompted_exists_for_another_daemon(
    tmp_path: Path, data: Path, project: Path
) -> None:
    """``session/new`` then a new process: load, resume, close and delete all work on it (no -32002); it is
    left out of ``session/list`` until it has a prompt (RFC 0009)."""
    async with run_daemon(tmp_path, data, name="creator") as daemon:
        session_id = await daemon.start(project)
        other = await daemon.new_session(project)
    header, events = read_session(data, session_id)
    assert header["id"] == session_id and header["cwd"] == str(project) and events == []
    async with run_daemon(tmp_path, data, name="loader") as daemon:
        await daemon.initialize()
        assert (await daemon.list(project)).sessions == []
        mark = daemon.mark()
        await daemon.load(session_id, project)
        assert daemon.updates_in(mark, session_id=session_id) == []
        assert (await daemon.prompt(session_id, "first words")).stop_reason == "end_turn"
        assert [s.session_id for s in (await daemon.list(project)).sessions] == [session_id]
        await daemon.close_session(session_id)
        await daemon.resume(other, project)
        await daemon.close_session(other)
        await daemon.delete(other)
    assert not session_path(data, other).exists()
    _, events = read_session(data, session_id)
    assert turn_starts(events) == [1]


async def test_the_first_prompt_of_a_new_session_on_a_full_disk_is_an_error_and_the_session_remains(
    tmp_path: Path, data: Path, project: Path
) -> None:
    """The stress run's "a new session's first prompt was answered end_turn and the session vanished"."""
    async with run_daemon(tmp_path, data, plugins=[DISK_FULL_PLUGIN], name="first") as daemon:
        session_id = await daemon.start(project)
        with pytest.raises(RequestError) as caught:
            await daemon.prompt(session_id, f"{FILL} hello")
        assert request_error(caught).code == INTERNAL_ERROR
    assert read_session(data, session_id)[1] == []  # the header only: what was durable
    async with run_daemon(tmp_path, data, name="second") as daemon:
        await daemon.initialize()
        with anyio.fail_after(10):
            await daemon.load(session_id, project)


async def test_the_data_dir_flag_naming_a_regular_file_does_not_stop_the_daemon(tmp_path: Path) -> None:
    """The same through the command line (``dsh acp --data-dir FILE``, the typer path): the daemon starts,
    says so in one line, serves ``initialize`` and exits 0 at stdin EOF."""
    from tests.support.env import sandbox_env

    blocker = tmp_path / "a-file"
    blocker.write_text("in the way")
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": 1, "clientCapabilities": {}},
    }
    with anyio.fail_after(30):
        result = await anyio.run_process(
            [sys.executable, "-m", "dsh", "acp", "--data-dir", str(blocker)],
            input=(json.dumps(request) + "\n").encode(),
            env=sandbox_env(tmp_path, "echo"),
            check=False,
        )
    assert result.returncode == 0, result.stderr.decode()
    answer = json.loads(result.stdout.decode().splitlines()[0])
    assert answer["id"] == 1 and answer["result"]["protocolVersion"] == 1
    lines = [line for line in result.stderr.decode().splitlines() if str(blocker) in line]
    assert len(lines) == 1 and "--data-dir" in lines[0], result.stderr.decode()
