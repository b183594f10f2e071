"""``session/load`` of a big session (issue #12 item 5): the replay waits for a client that does not read.

The replay sends its frames as it makes them, a batch at a time, and awaits the writer's back-pressure between
batches (RFC 0008's ``flow``): a client that stops reading during a load leaves dsh's memory flat instead of every
remaining frame queued in it, and once the client reads again every update arrives, in order, before the load's
answer. The load's speed is measured by ``scripts/bench_persistence.py``, not here.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio

from tests.support.durable import write_long_session
from tests.support.stall import spawn_stalling

WAIT = 30.0
WORDS = 100_000
"""About 19 MB of replay frames: far more than the pipe and the writer's limit of frames hold."""


async def test_a_replay_waits_for_a_client_that_does_not_read_and_loses_nothing(tmp_path: Path) -> None:
    cwd = tmp_path / "project"
    cwd.mkdir()
    texts = write_long_session(tmp_path / "data", "big", cwd, WORDS, reasoning=3)
    async with spawn_stalling(tmp_path) as daemon:
        with anyio.fail_after(WAIT):
            await daemon.request(
                "initialize",
                {"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
            )
            load_id = await daemon.request("session/load", {"sessionId": "big", "cwd": str(cwd), "mcpServers": []})
            await daemon.wait_pipe_full()
            before = peak = daemon.rss_bytes()
            began = time.monotonic()
            while time.monotonic() - began < 1.5:  # the scenario: a client that stops reading mid-replay
                peak = max(peak, daemon.rss_bytes())
                await anyio.sleep(0.05)
            updates: list[dict[str, Any]] = []
            initialize = await daemon.read()
            assert initialize.get("id") == 1 and "result" in initialize, initialize
            answer = await daemon.response(load_id, updates)
        assert "result" in answer, answer
        growth = peak - before
        assert growth < 8 * 1024 * 1024, f"RSS grew by {growth / 2**20:.1f} MiB while the client did not read"
        chunks = [
            params["update"]
            for params in updates
            if params["update"]["sessionUpdate"] in ("agent_message_chunk", "agent_thought_chunk")
        ]
        assert [update["content"]["text"] for update in chunks] == texts, "a replayed chunk was lost or reordered"
        assert [update["sessionUpdate"] for update in chunks[:4]] == ["agent_thought_chunk"] * 3 + [
            "agent_message_chunk"
        ]
        assert {update["messageId"] for update in chunks} == {"t1.1", "m1.1"}
