"""No process outlives a killed daemon (issue 42 item 2; RFC 0031): after ``kill -9`` of ``dsh acp``, every process
it started for a session is ended by its watchdog, whatever shape it took to escape.

Shapes, all started in one session of a real daemon driven by the SDK client and a scripted model (bypass mode):

* a background command ``sh -c 'sleep & sleep; wait'`` (a shell with two children);
* ``setsid sleep`` (a new session: out of the command's process group);
* a double fork (fork, ``setsid``, fork, the middle process exits: the daemon-style escape);
* an MCP server's ``setsid`` grandchild (and the server itself).

Every process carries a marker variable from the daemon's environment, so the test finds them all in ``/proc``
without knowing their pids. The bound is hang detection on a busy machine (the figure is in RFC 0031).
"""

from __future__ import annotations

import os
import secrets
import sys
import time
from pathlib import Path

import anyio
import pytest
from acp.schema import EnvVariable, McpServerStdio

from tests.support.durable import WAIT, run_daemon
from tests.support.editor import call
from tests.support.env import write_script
from tests.support.mcp_hostile import hostile_server

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the watchdog reads /proc")

DAEMONIZE = "import os, time\nif os.fork(): os._exit(0)\nos.setsid()\nif os.fork(): os._exit(0)\ntime.sleep(603)"
"""The classic double fork of a daemon: fork, leave the session, fork again, the middle process exits."""
GONE_WITHIN = 30.0
"""Hang detection, not a latency promise: the watchdog reacts to the pipe closing at once."""


def marked(marker: str) -> dict[int, str]:
    """pid → command line of every live (not zombie) process whose environment carries *marker*."""
    found: dict[int, str] = {}
    needle = f"DSH_ORPHAN_PROBE={marker}".encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as file:
                if needle not in file.read().split(b"\0"):
                    continue
            with open(f"/proc/{name}/stat", "rb") as file:
                stat = file.read()
            if stat[stat.rindex(b")") + 2 :].startswith(b"Z"):
                continue
            with open(f"/proc/{name}/cmdline", "rb") as file:
                found[int(name)] = file.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except (OSError, ValueError):
            continue
    return found


async def test_kill_9_of_the_daemon_leaves_no_process_of_any_shape(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    marker = secrets.token_hex(8)
    mcp_dir = tmp_path / "mcp"
    mcp_dir.mkdir()
    entry = hostile_server(str(mcp_dir))
    mcp = McpServerStdio(
        name=entry["name"], command=entry["command"], args=entry["args"], env=[EnvVariable(**e) for e in entry["env"]]
    )
    ready = (
        project / "setsid.pid"
    )  # inside the roots (the sandbox lets approved commands write there); the command ends only once the escape happened (else its group kill races it)
    setsid = (
        f"setsid sh -c 'echo $$ > {ready}.tmp; mv {ready}.tmp {ready}; exec sleep 602' >/dev/null 2>&1 </dev/null & "
        f"while [ ! -s {ready} ]; do sleep 0.01; done; echo started"
    )
    model = write_script(
        tmp_path / "script.json",
        [
            call("run_command", "c1", command="sh -c 'sleep 601 & sleep 601; wait'", background=True),
            call("run_command", "c2", command=setsid),
            call(
                "run_command",
                "c3",
                command=f"{sys.executable} -c '{DAEMONIZE}' </dev/null >/dev/null 2>&1; echo started",
            ),
            call("mcp__bad__spawn", "s1"),
            {"text": "all started"},
        ],
    )
    env = {"DSH_ORPHAN_PROBE": marker, "DSH_MCP_TIMEOUT": "30"}
    async with run_daemon(tmp_path, tmp_path / "data", model=model, env=env) as daemon:
        await daemon.initialize()
        with anyio.fail_after(WAIT):
            session = (await daemon.conn.new_session(cwd=str(project), mcp_servers=[mcp])).session_id
            await daemon.conn.set_session_mode(session_id=session, mode_id="bypass")
        assert (await daemon.prompt(session, "start them")).stop_reason == "end_turn"
        grandchild = int((mcp_dir / "grandchild").read_text())
        with anyio.fail_after(
            GONE_WITHIN, reason=f"{marked(marker)}"
        ):  # the background command's children start on their own time
            while True:
                found = marked(marker)
                lines = list(found.values())
                escaped = grandchild in found and os.getsid(grandchild) == grandchild  # its setsid ran
                if lines.count("sleep 601") == 2 and escaped:
                    break
                await anyio.sleep(0.05)
        assert any(line == "sleep 602" for line in lines), lines  # setsid sleep
        assert any("time.sleep(603)" in line for line in lines), lines  # the double fork's orphan
        assert any("sh -c sleep 601" in line for line in lines), lines
        before = len(found)
        daemon.kill()
        await daemon.wait_killed()
        killed_at = time.monotonic()
    with anyio.fail_after(GONE_WITHIN):
        while marked(marker):  # noqa: ASYNC110 - other processes: no event to wait on, so poll, bounded
            await anyio.sleep(0.02)
    took = time.monotonic() - killed_at
    print(f"{before} processes of the killed daemon ended within {took:.2f} s")
    assert marked(marker) == {}
