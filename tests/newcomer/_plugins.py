"""Test plugins for ``DSH_PLUGINS=tests.newcomer._plugins:<name>`` (the repository root is on the daemon's path)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from dsh.kernel import plugin

if TYPE_CHECKING:
    from dsh.kernel import Context

__all__ = ["failing", "plugin_model"]

ANSWER = "answered by the plugin's model"


@plugin("newcomer_model", inject=("llm",))
def plugin_model(ctx: Context, config: object) -> None:
    """Serves the model ``plugin-model``: a prompt to it works only when the plugin was loaded."""

    async def stream(request: Any) -> AsyncIterator[Any]:
        yield {"type": "text-delta", "text": ANSWER}
        yield {"type": "finish", "reason": {"kind": "stop"}}

    ctx.llm.register_adapter(["plugin-model"], stream)


def failing(ctx: Context, config: object) -> None:
    raise RuntimeError("the plugin could not start")
