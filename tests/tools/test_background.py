"""Background commands: run_command with background returns at once with an id and the first output;
command_output gives what was printed since the last read and whether it still runs; command_kill stops the
whole group; a session's commands die when the session is disposed; ids are per session."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from dsh import events as ev
from dsh.kernel import Context
from tests.tools.conftest import Call, FakeAgent, alive, needs_proc, text, wait_for_file, wait_until_dead


@dataclass
class _Session:
    id: str


def _pid(result: Any) -> int:
    pid: int = result.display["pid"]
    return pid


@needs_proc
async def test_start_read_and_kill(call: Call, work: Path) -> None:
    started = await call(
        "run_command", {"command": "echo ready; read -t 30 x < /dev/zero; sleep 30", "background": True}
    )
    assert not started.is_error, text(started)
    body = text(started)
    assert body.startswith("Started in the background as bg1 (pid ")
    assert "command_output(id='bg1')" in body and "First output:\nready" in body
    pid = _pid(started)
    assert alive(pid)
    again = await call("command_output", {"id": "bg1"})
    assert text(again) == "bg1 is still running.\n(no new output)"
    killed = await call("command_kill", {"id": "bg1"})
    assert text(killed).startswith("Stopped bg1 (killed by SIG")
    await wait_until_dead(pid, pid, within=5)
    after = await call("command_output", {"id": "bg1"})
    assert text(after).startswith("bg1 is killed by SIG")
    assert text(await call("command_kill", {"id": "bg1"})).startswith("bg1 had already stopped")


async def test_output_since_the_last_read_and_the_exit_code(call: Call, work: Path) -> None:
    script = "echo one; while [ ! -e go ]; do sleep 0.01; done; echo two; echo three; exit 3"
    started = await call("run_command", {"command": script, "background": True})
    assert "First output:\none" in text(started)
    quiet = await call("command_output", {"id": "bg1", "wait": 0.2})  # nothing new within the wait
    assert text(quiet) == "bg1 is still running.\n(no new output)"
    (work / "go").touch()
    seen = ""
    with anyio.fail_after(10):
        while "exited" not in seen:  # wait returns at the first new output or at the exit: no polling loop
            seen += text(await call("command_output", {"id": "bg1", "wait": 10})) + "\n"
    assert "one" not in seen  # what was read before is not repeated
    assert "two" in seen and "three" in seen and "exited with code 3" in seen


async def test_unknown_ids_and_other_sessions(call: Call, work: Path) -> None:
    missing = await call("command_output", {"id": "bg9"})
    assert missing.error is not None and missing.error["code"] == "NOT_FOUND"
    await call("run_command", {"command": "sleep 30", "background": True})
    other = await call("command_output", {"id": "bg1"}, on=FakeAgent.at(work, "someone-else"))
    assert other.error is not None and other.error["code"] == "NOT_FOUND"
    await call("command_kill", {"id": "bg1"})


@needs_proc
async def test_disposing_the_session_kills_its_commands_and_only_its(core: Context, call: Call, work: Path) -> None:
    mine = await call("run_command", {"command": "sleep 60 & echo $! > child; wait", "background": True})
    theirs = await call(
        "run_command", {"command": "sleep 60", "background": True}, on=FakeAgent.at(work, "other-session")
    )
    child = int(await wait_for_file(work / "child"))
    registry = core.get("background_commands")
    assert "bg1 (running, pid" in registry.describe("session-1")
    core.emit(ev.SESSION_DISPOSED, _Session("session-1"))
    await wait_until_dead(_pid(mine), _pid(mine), child, within=5)  # the group, background child included
    assert alive(_pid(theirs))
    assert registry.describe("session-1") == "none"
    core.emit(ev.SESSION_DISPOSED, _Session("other-session"))
    await wait_until_dead(_pid(theirs), _pid(theirs), within=5)
