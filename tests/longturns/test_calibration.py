"""Calibration and the naive run, in process against the loopback model (real HTTP): a provider that counts 1.5
times dsh's estimate gets no request over the threshold (compaction follows its count, not the estimate), and the
same long turn with pruning and summaries off passes the window (the naive size the first acceptance test avoids).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from dsh.context import ContextConfig
from dsh.kernel import App, Context
from dsh.providers._settings import ProviderSettings
from dsh.services.agents import AgentOptions
from tests.support.bulk_tool import plugin as bulk_plugin
from tests.support.counting_model import CountingModel
from tests.support.provider_server import FakeProvider

MODEL = "openai:test-model"
WINDOW = 16_000
THRESHOLD = 0.8 * WINDOW


@asynccontextmanager
async def core(server: FakeProvider, tmp_path: Path, **compaction: Any) -> AsyncIterator[Context]:
    from dsh.app import load_core

    settings = {"base_url": f"{server.url}/v1", "api_key": "k", "retries": 0, "context_windows": {"test-model": WINDOW}}
    context = ContextConfig.model_validate({"compaction": compaction})
    async with App() as app:
        load_core(
            app.ctx,
            providers={"openai": ProviderSettings.model_validate(settings)},
            data_dir=tmp_path / "data",
            builtin_tools=False,
            context=context,
        )
        app.ctx.plugin(bulk_plugin)
        yield app.ctx


async def run_turn(ctx: Context, tmp_path: Path) -> Any:
    handle = await ctx.agents.create(
        agent_id="s", session_id="s", meta={"cwd": str(tmp_path)}, agent_options=AgentOptions(model=MODEL)
    )
    handle.agent.send([{"type": "text", "text": "go"}])
    with anyio.fail_after(60):
        await handle.agent.when_idle()
    return handle.agent.session


async def test_compaction_follows_the_providers_count_not_the_estimate(server: FakeProvider, tmp_path: Path) -> None:
    model = CountingModel(WINDOW, factor=1.5, calls=40, size=12_000)  # 3,000 estimated, 4,500 counted per result
    server.respond(model)
    async with core(server, tmp_path) as ctx:
        session = await run_turn(ctx, tmp_path)
        end = session.last("turn/end")
        assert end is not None and end.data["reason"] == {"kind": "completed"}
        changes = [e for e in session.events if e.type in ("context/prune", "context/compaction")]
        assert len(changes) >= 5
        assert model.refused == []
        # every request the provider saw stayed under the threshold by its own count; with the estimate alone
        # (two thirds of that count) requests up to 1.5 x the threshold would have been sent
        assert max(model.counts) <= THRESHOLD
        # the first change came when the provider's count reached the threshold, while the estimate alone had not
        first = changes[0].data
        assert first["tokens_before"] >= THRESHOLD
        assert first["tokens_before"] / 1.5 < THRESHOLD
        calibrations = [e.data["ratio"] for e in session.events if e.type == "context/calibration"]
        assert calibrations and all(1.4 < ratio < 1.6 for ratio in calibrations)


async def test_the_same_turn_without_pruning_or_summaries_passes_the_window(
    server: FakeProvider, tmp_path: Path
) -> None:
    model = CountingModel(WINDOW, factor=1.0, calls=60, size=6_000)
    server.respond(model)
    async with core(server, tmp_path, enabled=False) as ctx:
        session = await run_turn(ctx, tmp_path)
        end = session.last("turn/end")
        assert end is not None and end.data["reason"]["kind"] == "error"
        assert model.refused and model.refused[0] > WINDOW  # the naive size, refused by the provider
        assert len(model.counts) < 15  # it failed early: 60 results of 1,500 tokens are 90,000 tokens
