"""Issue 23's first acceptance point, end to end: one prompt that becomes a 300-step turn (every step a tool
result of 3,000 tokens) in a 32,000-token window completes, against a loopback OpenAI-compatible model that
refuses any request over its window; the compactions and prunes it took survive a restart (``session/load``
then the next prompt sends a request of the same size as the same prompt before the restart)."""

from __future__ import annotations

import shutil
from pathlib import Path

import anyio
from acp import text_block

from tests.context.test_sections import write_config
from tests.support.bulk_tool import PLUGIN
from tests.support.counting_model import CountingModel
from tests.support.durable import read_session, run_daemon
from tests.support.provider_server import FakeProvider

WINDOW = 32_000
STEPS = 300
RESULT_CHARS = 12_000  # 3,000 tokens each
CONFIG = f"""\
providers:
  openai:
    context_windows: {{test-model: {WINDOW}}}
"""


def env_for(server: FakeProvider) -> dict[str, str]:
    return {"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "test"}


async def test_a_300_step_turn_completes_in_a_32k_window_and_survives_a_restart(
    server: FakeProvider, tmp_path: Path
) -> None:
    (tmp_path / "home").mkdir()
    write_config(tmp_path, CONFIG)
    model = CountingModel(WINDOW, factor=1.2, calls=STEPS - 1, size=RESULT_CHARS)
    server.respond(model)
    data = tmp_path / "data"
    copy = tmp_path / "data-copy"
    async with run_daemon(tmp_path, data, model="openai:test-model", plugins=[PLUGIN], env=env_for(server)) as daemon:
        session = await daemon.start(cwd=tmp_path)
        with anyio.fail_after(120):
            response = await daemon.conn.prompt(session_id=session, prompt=[text_block("run bulk until done")])
        assert response.stop_reason == "end_turn", daemon.stderr()[-3000:]
        assert model.issued == STEPS - 1 and len(model.counts) == STEPS
        assert model.refused == [], "a request passed the window"
        assert max(model.counts) <= WINDOW
        _, events = read_session(data, session)
        kinds = [event["type"] for event in events]
        assert kinds.count("turn/start") == 1 and kinds.count("tool/result") == STEPS - 1
        compactions = [e["data"] for e in events if e["type"] == "context/compaction"]
        prunes = [e["data"] for e in events if e["type"] == "context/prune"]
        assert compactions, "no compaction inside the turn"
        assert all(c["keep"] for c in compactions)  # each cut inside the turn kept the user's request verbatim
        # the naive size: every tool result the turn produced, without pruning or summaries, is far over the window
        naive = sum(len(e["data"]["content"][0]["text"]) for e in events if e["type"] == "tool/result") // 4
        assert naive >= 40 * WINDOW * 0.7
        cards = [u for u in daemon.updates_in(0, session_id=session) if u.get("title") == "Compacted conversation"]
        assert len(cards) == len(compactions)  # the editor sees each in-turn compaction as it sees one between turns
        shutil.copytree(data, copy)  # the state a restart finds
        before = len(model.counts)
        assert (await daemon.prompt(session, "and now?")).stop_reason == "end_turn"
        live_size = model.counts[before]
    async with run_daemon(
        tmp_path, copy, model="openai:test-model", plugins=[PLUGIN], env=env_for(server), name="restarted"
    ) as daemon:
        await daemon.initialize()
        await daemon.load(session, cwd=tmp_path)
        before = len(model.counts)
        assert (await daemon.prompt(session, "and now?")).stop_reason == "end_turn"
        reloaded_size = model.counts[before]
    assert abs(reloaded_size - live_size) <= 0.01 * live_size, (live_size, reloaded_size)
    assert len(prunes) > len(compactions)  # pruning alone avoided most summaries
