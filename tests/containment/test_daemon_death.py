"""A ``kill -9`` of the daemon takes its running commands with it: ``run_command``'s shell must not live on to
finish its side effects (issue #10, item 5e; RFC 0010).

The command reports its shell's pid through a FIFO once it runs, then sleeps and would create a marker file.
After the daemon is killed, the shell must be gone at once (the parent-death signal), so the marker never
appears. On a daemon without the signal the shell lives on, the wait below times out at about 2 s and the
marker exists: the test fails either way.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import anyio
import pytest
from acp import text_block

from tests.support.durable import WAIT, run_daemon
from tests.support.editor import call
from tests.support.env import write_script

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")

GONE_DEADLINE = 1.0
"""How long the shell may outlive the daemon (the kernel delivers the signal when the daemon's thread exits)."""


def alive(pid: int) -> bool:
    """Whether *pid* runs (a zombie counts as gone: an orphan nobody reaps in a container stays one)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return not stat[stat.rindex(")") + 2 :].startswith("Z")


async def test_kill_9_of_the_daemon_kills_a_running_command(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    fifo = project / "started.fifo"  # inside the roots: the command runs sandboxed (workspace-write)
    os.mkfifo(fifo)
    marker = project / "marker"
    command = f"echo $$ > {fifo}; sleep 2; touch {marker}"
    model = write_script(tmp_path / "script.json", [call("run_command", "c1", command=command), {"text": "done"}])
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        async with run_daemon(tmp_path, tmp_path / "data", model=model) as daemon:
            session = await daemon.start(project)
            await daemon.conn.set_session_mode(session_id=session, mode_id="bypass")
            with anyio.fail_after(WAIT):
                async with anyio.create_task_group() as group:

                    async def prompt() -> None:
                        try:
                            await daemon.conn.prompt(session_id=session, prompt=[text_block("go")])
                        except Exception:  # the connection dies with the daemon
                            pass

                    group.start_soon(prompt)
                    await anyio.wait_readable(reader)
                    shell = int(os.read(reader, 100).decode().strip())
                    assert alive(shell)
                    exited = os.pidfd_open(shell)  # readable once the shell has terminated
                    daemon.kill()
                    await daemon.wait_killed()
                    killed_at = time.monotonic()
                    group.cancel_scope.cancel()
        try:
            with anyio.move_on_after(3.0):  # without the signal the shell ends after its sleep 2, touching the marker
                await anyio.wait_readable(exited)
        finally:
            os.close(exited)
        survived = time.monotonic() - killed_at
        assert not alive(shell), "the command's shell outlived the daemon by more than 3 s"
        assert survived < GONE_DEADLINE, f"the command's shell outlived the daemon by {survived:.2f} s"
        assert not marker.exists(), "the command finished its side effect after the daemon was killed"
    finally:
        os.close(reader)
