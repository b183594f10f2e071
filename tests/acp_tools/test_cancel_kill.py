"""``session/cancel`` stops a local ``run_command`` at once: a running ``sleep 60`` is killed, the prompt answers
``cancelled`` within a second, and no process of the command is left behind.

The command's processes are found through ``/proc``: the shell carries a unique marker in its command line and
the ``sleep`` carries it in its environment (a forked child keeps the shell's command line until it execs), so
every process of the command is visible at every moment. A zombie counts as gone (in a container whose PID 1
does not reap, an orphan that died stays a zombie). The test knows the command is running because it writes
to a FIFO the test waits on (``anyio.wait_readable``), after starting ``sleep`` in the background.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import anyio
import pytest
from acp.schema import PromptResponse

from tests.support.editor import DEADLINE, EditorClient, call, run_editor, text_of, write_script

pytestmark = pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs /proc")

KILL_DEADLINE = 1.0


def marked_processes(marker: str) -> list[int]:
    """Live (non-zombie) processes whose command line or environment holds *marker*."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            if stat[stat.rindex(")") + 2 :].startswith("Z"):
                continue
            cmdline = (entry / "cmdline").read_bytes()
            environ = (entry / "environ").read_bytes()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if marker.encode() in cmdline or marker.encode() in environ:
            found.append(int(entry.name))
    return found


async def test_cancel_kills_a_running_sleep_and_leaves_no_orphan(tmp_path: Path) -> None:
    marker = f"dsh-test-marker-{uuid.uuid4().hex}"
    (tmp_path / "project").mkdir()
    fifo = tmp_path / "project" / "started.fifo"  # inside the roots: the command runs sandboxed (workspace-write)
    os.mkfifo(fifo)
    command = f"DSH_TEST_MARKER={marker} sleep 60 & echo started > {fifo}; wait; : {marker}"
    model = write_script(tmp_path / "script.json", [call("run_command", "c1", command=command)])
    client = EditorClient([])
    answer: list[PromptResponse] = []
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        async with run_editor(tmp_path, model, client) as editor:
            session = (await editor.new_session()).session_id
            await editor.conn.set_session_mode(session_id=session, mode_id="bypass")

            async def prompt() -> None:
                answer.append(await editor.prompt(session, "sleep a while"))

            cancelled_at = 0.0
            with anyio.fail_after(DEADLINE):
                async with anyio.create_task_group() as group:
                    group.start_soon(prompt)
                    await anyio.wait_readable(reader)
                    assert os.read(reader, 100) == b"started\n"
                    assert marked_processes(marker), "the command's processes are not visible in /proc"
                    cancelled_at = time.monotonic()
                    await editor.conn.cancel(session_id=session)
            answered_after = time.monotonic() - cancelled_at
            assert answer[0].stop_reason == "cancelled"
            assert answered_after < KILL_DEADLINE, f"the prompt answered {answered_after:.2f} s after the cancel"

            left = marked_processes(marker)
            while left and time.monotonic() - cancelled_at < KILL_DEADLINE:
                await anyio.sleep(0.02)  # the one bounded wait: for the kernel to finish the processes off
                left = marked_processes(marker)
            assert left == [], f"processes still alive {KILL_DEADLINE} s after the cancel: {left}"

            final = editor.final(session, "c1")
            assert final["status"] == "failed"
            assert text_of(final) == "(no output)\n[cancelled]"
        assert client.permissions() == []
    finally:
        os.close(reader)
