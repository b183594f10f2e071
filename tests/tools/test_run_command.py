"""run_command and the local process runner: exit codes, the output cap, timeouts and cancellation that kill
the whole process group (no orphan), and a child that never sees the daemon's stdin or stdout."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest

from dsh.kernel import CancelToken
from dsh.services.tools import ToolResult
from dsh.tools import run_process
from dsh.tools._budget import COMMAND_BUDGET
from dsh.tools._process import KILL_GRACE
from tests.support.timing import promised
from tests.tools.conftest import Call, needs_proc, text, wait_for_file, wait_until_dead

pytestmark = needs_proc

SPAWN_BACKGROUND_AND_FOREGROUND = "echo $$ > pgid; sleep 60 & echo $! > bg; sleep 60"


# -- exit codes and output ------------------------------------------------------------------------------------


async def test_success_shows_output_and_exit_code(call: Call, work: Path) -> None:
    result = await call("run_command", {"command": "echo out; echo err >&2; pwd"})
    assert not result.is_error
    assert text(result) == f"out\nerr\n{work}\n[exit code: 0]"
    assert result.display == {
        "exit_code": 0,
        "signal": None,
        "timed_out": False,
        "cancelled": False,
        "truncated": False,
    }


async def test_a_non_zero_exit_is_an_error_that_still_shows_the_output(call: Call) -> None:
    result = await call("run_command", {"command": "echo failing; exit 7"})
    assert result.is_error
    assert text(result) == "failing\n[exit code: 7]"
    assert result.display is not None and result.display["exit_code"] == 7


async def test_no_output_and_death_by_signal(call: Call) -> None:
    assert text(await call("run_command", {"command": "true"})) == "(no output)\n[exit code: 0]"
    killed = await call("run_command", {"command": "kill -9 $$"})
    assert killed.is_error
    assert text(killed) == "(no output)\n[killed by SIGKILL]"
    assert killed.display is not None and killed.display["exit_code"] is None
    assert killed.display["signal"] == "SIGKILL"


async def test_cwd_is_relative_to_the_session(call: Call, work: Path) -> None:
    (work / "sub").mkdir()
    assert text(await call("run_command", {"command": "pwd", "cwd": "sub"})) == f"{work / 'sub'}\n[exit code: 0]"
    missing = await call("run_command", {"command": "pwd", "cwd": "nope"})
    assert missing.error is not None and missing.error["code"] == "BAD_CWD"


async def test_arguments_are_validated(call: Call) -> None:
    for arguments in [{"command": "true", "timeout": 601}, {"command": "true", "timeout": 0}, {}]:
        result = await call("run_command", arguments)
        assert result.error is not None and result.error["code"] == "INVALID_ARGUMENTS", arguments


async def test_long_output_keeps_head_and_tail_and_spills_the_whole(call: Call) -> None:
    result = await call("run_command", {"command": "for i in $(seq 1 20000); do echo line$i; done"})
    assert not result.is_error
    body = text(result)
    lines = body.split("\n")
    assert lines[:2] == ["line1", "line2"]  # the first error of a build is at the top
    assert body.endswith("line20000\n[exit code: 0]")
    assert len(lines) <= COMMAND_BUDGET.max_lines + 1 and len(body) <= COMMAND_BUDGET.max_chars + 300
    assert result.spill is not None
    [marker] = [line for line in lines if line.startswith("[… ")]
    assert result.spill in marker and "read_file it with offset=129" in marker
    whole = await anyio.Path(result.spill).read_text()
    assert whole.startswith("line1\n") and "\nline10000\n" in whole and whole.endswith("line20000\n[exit code: 0]")


async def test_the_cap_cuts_at_a_character_boundary(work: Path) -> None:
    # 100 two-byte characters, keep 51 bytes: the cut falls inside a character, which is dropped whole
    result = await run_process("printf 'é%.0s' $(seq 1 100)", cwd=str(work), timeout=10, output_limit=51)
    assert result.truncated
    assert result.output == "é" * 25
    head = await run_process("printf 'é%.0s' $(seq 1 100)", cwd=str(work), timeout=10, output_limit=51, keep="head")
    assert head.output == "é" * 25


# -- stopping: timeout, cancel, background children ------------------------------------------------------------


async def _group_gone(pgid: int, *pids: int, within: float = promised(1.0)) -> None:
    await wait_until_dead(pgid, *pids, within=within)


async def test_timeout_kills_the_process_group(call: Call, work: Path) -> None:
    started = time.monotonic()
    result = await call("run_command", {"command": SPAWN_BACKGROUND_AND_FOREGROUND, "timeout": 0.5})
    elapsed = time.monotonic() - started
    assert result.is_error
    assert text(result) == (
        "(no output)\n[timed out after 0.5 s: the command and the processes it started were killed. To go on: run "
        "it again with a larger timeout (up to 600), or run it with background: true and follow its output with "
        "command_output (stop it with command_kill); or split the work into shorter commands]"
    )
    assert result.display is not None and result.display["timed_out"] is True
    assert elapsed < 0.5 + KILL_GRACE + promised(0.7)  # the command sleeps 60 s
    await _group_gone(int((work / "pgid").read_text()), int((work / "bg").read_text()))


async def _cancel_while_running(call: Call, work: Path, command: str) -> tuple[ToolResult, float]:
    signal = CancelToken()
    results: list[ToolResult] = []

    async def run() -> None:
        results.append(await call("run_command", {"command": command}, signal=signal))

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        await wait_for_file(work / "bg")
        cancelled_at = time.monotonic()
        signal.abort("cancelled")
    return results[0], time.monotonic() - cancelled_at


async def test_cancel_kills_sleep_and_its_background_child_within_a_second(call: Call, work: Path) -> None:
    result, elapsed = await _cancel_while_running(call, work, SPAWN_BACKGROUND_AND_FOREGROUND)
    assert elapsed < promised(1.0)  # the command sleeps 60 s
    assert result.is_error
    assert text(result) == "(no output)\n[cancelled]"
    assert result.display is not None and result.display["cancelled"] is True
    pgid, background = int((work / "pgid").read_text()), int((work / "bg").read_text())
    assert pgid != background
    await _group_gone(pgid, background)


async def test_cancel_kills_a_group_that_ignores_sigterm(call: Call, work: Path) -> None:
    command = "trap '' TERM; echo $$ > pgid; sleep 60 & echo $! > bg; sleep 60"
    result, elapsed = await _cancel_while_running(call, work, command)
    assert elapsed < promised(1.0)  # the command sleeps 60 s
    assert text(result).endswith("[cancelled]")
    await _group_gone(int((work / "pgid").read_text()), int((work / "bg").read_text()))


async def test_a_cancelled_task_still_kills_the_group(work: Path) -> None:
    """Cancellation of the calling task (not the signal): the clean-up runs shielded, then it re-raises."""
    with anyio.move_on_after(20):
        async with anyio.create_task_group() as group:

            async def run() -> None:
                await run_process(SPAWN_BACKGROUND_AND_FOREGROUND, cwd=str(work), timeout=60, output_limit=1000)

            group.start_soon(run)
            await wait_for_file(work / "bg")
            group.cancel_scope.cancel()
    await _group_gone(int((work / "pgid").read_text()), int((work / "bg").read_text()))


async def test_background_children_do_not_outlive_the_command(call: Call, work: Path) -> None:
    """A command that exits leaving children behind returns at once, and the children are gone."""
    started = time.monotonic()
    holding = await call("run_command", {"command": "echo $$ > pgid; sleep 60 & echo $! > bg; echo done"})
    assert text(holding) == "done\n[exit code: 0]"
    detached = await call("run_command", {"command": "sleep 60 > /dev/null 2>&1 & echo $! > bg2; echo ok"})
    assert text(detached) == "ok\n[exit code: 0]"
    assert time.monotonic() - started < promised(2 * KILL_GRACE + 1.0)  # not the children's 60 s
    await _group_gone(int((work / "pgid").read_text()), int((work / "bg").read_text()), int((work / "bg2").read_text()))


async def test_an_already_cancelled_call_does_not_start(call: Call, work: Path) -> None:
    signal = CancelToken()
    signal.abort("cancelled")
    result = await call("run_command", {"command": "touch started"}, signal=signal)
    assert text(result) == "(no output)\n[cancelled]"
    assert not (work / "started").exists()


# -- the daemon's stdin and stdout are never the child's -----------------------------------------------------


@contextmanager
def protocol_fds() -> Iterator[tuple[int, int]]:
    """Put pipes on fds 0 and 1 as a daemon has them (an editor on the other end); yield (the write end of
    "stdin", which we keep open and silent, and the read end of "stdout"). Used inside the test body: pytest
    re-installs its own capture on fds 0-2 between the set-up and call phases."""
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    saved = os.dup(0), os.dup(1)
    os.dup2(stdin_read, 0)
    os.dup2(stdout_write, 1)
    os.close(stdin_read)
    os.close(stdout_write)
    try:
        yield stdin_write, stdout_read
    finally:
        os.dup2(saved[0], 0)
        os.dup2(saved[1], 1)
        for fd in (*saved, stdin_write, stdout_read):
            os.close(fd)


async def test_a_command_reading_stdin_gets_eof_at_once(call: Call) -> None:
    with protocol_fds():
        probe = await call("run_command", {"command": "readlink /proc/$$/fd/0; readlink /proc/$PPID/fd/0"})
        started = time.monotonic()
        result = await call("run_command", {"command": "cat; read line; echo read=$?", "timeout": 10})
        elapsed = time.monotonic() - started
    assert text(result) == "read=1\n[exit code: 0]"
    assert elapsed < 5
    child_stdin, our_stdin = text(probe).split("\n")[:2]
    assert child_stdin == "/dev/null"
    assert our_stdin.startswith("pipe:")  # the test did put a silent pipe on our stdin: inheriting it would block


async def test_the_daemons_stdout_is_never_used(call: Call) -> None:
    with protocol_fds() as (_stdin, stdout_read):
        result = await call("run_command", {"command": "echo to-stdout; echo to-stderr >&2"})
        os.set_blocking(stdout_read, False)
        with pytest.raises(BlockingIOError):
            os.read(stdout_read, 1024)  # nothing reached the protocol's stdout, and its writer is still open
    assert text(result) == "to-stdout\nto-stderr\n[exit code: 0]"


async def test_a_timeout_at_the_maximum_only_suggests_background(call: Call) -> None:
    """At the maximum timeout a larger one is not offered: the next step is a background run."""
    from dsh.tools._commands import COMMAND_TIMEOUT_MAX, timeout_note

    note = timeout_note(COMMAND_TIMEOUT_MAX)
    assert note.startswith("[timed out after 600 s")
    assert "larger timeout" not in note
    assert "background: true" in note and "command_output" in note
