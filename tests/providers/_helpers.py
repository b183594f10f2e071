"""Shared helpers: settings pointing at the fake server, a running core with the providers, chunk collection."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

from dsh.kernel import App, Context
from dsh.providers._settings import ProviderSettings
from dsh.services.llm import GenerateRequest, Message, StreamChunk

__all__ = ["KEY", "anthropic_settings", "collect", "openai_settings", "running", "user"]

KEY = "sk-test-SECRET-0123456789"
"""The key every test provider uses: it must never show up in a log line or an error message."""


def openai_settings(url: str, **overrides: Any) -> ProviderSettings:
    values: dict[str, Any] = {"type": "openai", "base_url": f"{url}/v1", "api_key": KEY, "retries": 2, "backoff": 0.01}
    values.update(overrides)
    return ProviderSettings.model_validate(values)


def anthropic_settings(url: str, **overrides: Any) -> ProviderSettings:
    values: dict[str, Any] = {"type": "anthropic", "base_url": url, "api_key": KEY, "retries": 2, "backoff": 0.01}
    values.update(overrides)
    return ProviderSettings.model_validate(values)


@asynccontextmanager
async def running(providers: dict[str, ProviderSettings] | None) -> AsyncIterator[Context]:
    """A running application from ``load_core(providers=...)``: services, loop, offline and remote models."""
    from dsh.app import load_core

    async with App() as app:
        load_core(app.ctx, providers=providers)
        yield app.ctx


def user(text: str) -> Message:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


async def collect(ctx: Context, request: GenerateRequest, within: float = 10) -> list[StreamChunk]:
    """Every chunk of one model call through ``ctx.llm.stream`` (the ``llm/stream`` seam)."""
    with anyio.fail_after(within):
        return [chunk async for chunk in await ctx.llm.stream(request)]
