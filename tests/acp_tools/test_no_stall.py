"""No tool call can hold the daemon or another session (issue 34, the stall test).

One session runs, in one step, 45 reads of FIFOs, a fetch of a 5 MB HTML page (from a loopback server of the
test), an edit that misses in a 1 MB file and the delete of a 1 GiB file; meanwhile a second session's
``session/prompt`` on the echo model, sent again and again for as long as that step runs, must answer within 5
times the time the same prompt takes on the idle daemon (medians, measured in the same run) and each within 1 s,
and the daemon's peak RSS (``VmHWM``) stays under 512 MiB.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import text_block

from tests.context.test_sections import write_config
from tests.support.env import sandbox_env, write_script
from tests.support.provider_server import Reply, serve
from tests.support.sdk import RecordingClient, connected_daemon

PROMPTS = 9
RATIO = 5.0
SLOWEST = 1.0
"""The issue's bound for every prompt of the second session while the heavy step runs (seconds)."""
RSS_LIMIT = 512 * 1024 * 1024
FIFOS = 45


class AllowingClient(RecordingClient):
    """Allows whatever it is asked (the 1 GiB file is over the checkpoint limit: the user is told and says yes)."""

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        from acp.schema import AllowedOutcome, RequestPermissionResponse

        options = kwargs.get("options") or args[0]
        chosen = next(o for o in options if o.kind == "allow_once")
        return RequestPermissionResponse(outcome=AllowedOutcome(option_id=chosen.option_id, outcome="selected"))


def peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def html_page(size: int) -> str:
    cell = "<div><p>Some <b>bold</b> and <i>italic</i> text, <a href='/x'>a link</a>.</p></div>\n"
    return "<html><head><title>Big</title></head><body>" + cell * (size // len(cell)) + "</body></html>"


@pytest.mark.timeout(600)
async def test_a_second_session_answers_while_one_session_runs_every_heavy_tool(tmp_path: Path) -> None:
    work = tmp_path
    for n in range(FIFOS):
        os.mkfifo(work / f"pipe{n}")
    (work / "big.txt").write_text("a line of the big file\n" * (1024 * 1024 // 23))
    (work / "huge.bin").touch()
    os.truncate(work / "huge.bin", 1 << 30)  # 1 GiB, sparse (the disk is shared)
    with serve() as server:
        server.script(Reply(body=html_page(5_000_000), headers={"Content-Type": "text/html; charset=utf-8"}))
        heavy = [{"name": "read_file", "arguments": {"path": f"pipe{n}"}} for n in range(FIFOS)]
        heavy += [
            {"name": "fetch_url", "arguments": {"url": f"{server.url}/big.html"}},
            {
                "name": "edit_file",
                "arguments": {"path": "big.txt", "old_string": "not in the file\n" * 40, "new_string": "x"},
            },
            {"name": "delete_file", "arguments": {"path": "huge.bin"}},
        ]
        steps = [
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "big.txt", "limit": 5}}]},
            {"tool_calls": heavy},
            {"text": "heavy work done"},
        ]
        model = write_script(work / "script.json", steps)
        write_config(work, f"tools: {{fetch_private: true}}\nmodels: ['{model}', echo]\n")
        client = AllowingClient()
        env = sandbox_env(work, model)
        async with connected_daemon(env, client, work, work / "dsh.stderr.log") as daemon:
            await daemon.initialize()
            busy = await daemon.new_session()
            await daemon.conn.set_session_mode(session_id=busy, mode_id="bypass")
            other = await daemon.new_session()
            await daemon.conn.set_config_option(session_id=other, config_id="model", value="echo")

            async def timed(text: str) -> float:
                start = time.perf_counter()
                with anyio.fail_after(60):
                    response = await daemon.conn.prompt(session_id=other, prompt=[text_block(text)])
                assert response.stop_reason == "end_turn"
                return time.perf_counter() - start

            await timed("warm up")
            idle = [await timed(f"idle {n}") for n in range(PROMPTS)]
            done = anyio.Event()

            async def run_busy() -> None:
                with anyio.fail_after(300):
                    await daemon.conn.prompt(session_id=busy, prompt=[text_block("do the heavy things")])
                done.set()

            def announced() -> int:
                return sum(1 for u in client.of(busy) if getattr(u, "session_update", "") == "tool_call")

            async with anyio.create_task_group() as group:
                group.start_soon(run_busy)
                with anyio.fail_after(120):
                    await client.wait_until(lambda: announced() >= 2)  # the heavy step's first call is announced
                loaded: list[float] = []
                while not done.is_set():  # the whole heavy step: every phase of it is measured
                    loaded.append(await timed(f"loaded {len(loaded)}"))
                    await anyio.sleep(0.02)  # pacing, not synchronisation: a person types slower
            peak = peak_rss(daemon.process.pid)
    assert len(loaded) >= PROMPTS, f"only {len(loaded)} prompts ran during the heavy step: no load was measured"
    ratio = statistics.median(loaded) / statistics.median(idle)
    report = (
        f"idle median {statistics.median(idle) * 1000:.1f} ms, under load median "
        f"{statistics.median(loaded) * 1000:.1f} ms and slowest {max(loaded) * 1000:.0f} ms of {len(loaded)}"
    )
    print(f"{report}: {ratio:.2f}x; peak RSS {peak >> 20} MiB")
    assert ratio <= RATIO, f"{report}: {ratio:.1f}x"
    assert max(loaded) < SLOWEST, report
    assert peak < RSS_LIMIT, f"the daemon's peak RSS was {peak >> 20} MiB"
    assert not (work / "huge.bin").exists()
    assert "heavy work done" in client.text(busy)
