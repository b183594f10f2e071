"""The replayed daemon's model: every model call, whatever model it names, streams the next recorded response.

Loaded by ``dsh acp --replay-models FILE`` (the option ``dsh replay`` passes; hidden from help). The listener is
the innermost of the ``llm/stream`` waterfall, where the recorder sat, so every other listener sees the same
streams as in the recording; the provider is never called. The providers of *models* (the recorded model and
picker) get a credential check that finds nothing missing and, when no adapter serves them here (a provider
the recording's configuration defined), the scripted adapter: a replay needs no key and no network.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsh import events as ev
from dsh.kernel import plugin

if TYPE_CHECKING:
    from dsh.kernel import Context, Next
    from dsh.services.llm import GenerateRequest, StreamChunk

__all__ = ["SCRIPT_NAME", "replay_models_plugin"]

SCRIPT_NAME = "dsh-replay"


def _no_key_missing() -> str | None:
    return None


@plugin("replay_models", inject=("llm", "scripted_models"))
def replay_models_plugin(ctx: Context, config: dict[str, Any]) -> None:
    """*config*: ``{"script": path of the steps (JSON), "models": [model names]}``."""
    steps = json.loads(Path(config["script"]).read_text(encoding="utf-8"))
    scripted = ctx.scripted_models
    scripted.add(SCRIPT_NAME, steps)
    model = f"scripted:{SCRIPT_NAME}"

    async def serve(
        request: GenerateRequest, next_: Next[GenerateRequest, AsyncIterator[StreamChunk]]
    ) -> AsyncIterator[StreamChunk]:
        stream: AsyncIterator[StreamChunk] = scripted(replace(request, model=model))
        return stream

    ctx.on(ev.LLM_STREAM, serve)
    for name in config.get("models", ()):
        if ":" not in name:
            continue
        provider = name.split(":", 1)[0]
        ctx.llm.register_credential_check(provider, _no_key_missing)
        if ctx.llm.unserved(name) is not None:
            ctx.llm.register_adapter([f"{provider}:*"], scripted)
