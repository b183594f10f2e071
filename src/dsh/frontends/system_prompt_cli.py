"""``dsh config show --system-prompt [--cwd DIR]``: the system prompt a new ACP session in DIR would send.

It is computed by the product's own code path (the core plugins, the context plugin with the file's settings, a
real agent on an in-memory session in DIR, the ``system-prompt/assemble`` waterfall, the configured extra prompt
appended), never by a second renderer that could drift.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dsh.settings import Settings

__all__ = ["render_system_prompt", "show_system_prompt"]


async def render_system_prompt(settings: Settings, cwd: str, mode: str = "default") -> str:
    """The system prompt of the first step of a new session in *cwd* (in *mode*), tools included, with the
    command's settings (the file's sections and providers, the resolved model and extra system prompt)."""
    from dsh.app import load_core
    from dsh.context import context_from_file
    from dsh.kernel import App
    from dsh.services.agents import AgentOptions
    from dsh.services.system_prompt import render_prompt

    loaded = settings.config
    extra = settings.system_prompt
    async with App() as app:
        ctx = app.ctx
        load_core(
            ctx,
            providers=loaded.providers if loaded is not None else None,
            secrets=loaded.secrets if loaded is not None else None,
            context=context_from_file(loaded),
        )
        ctx.policy.session("preview").mode = mode
        handle = await ctx.agents.create(
            agent_id="preview",
            session_id="preview",
            meta={"cwd": cwd},
            agent_options=AgentOptions(model=settings.model, system_prompt=extra),
        )
        try:
            assembly = await ctx.system_prompt.assemble(handle.agent)
        finally:
            await handle.dispose()
    return "\n\n".join(part for part in (render_prompt(assembly), extra) if part)


def show_system_prompt(settings: Settings, cwd: str | None) -> int:
    """Print the system prompt to stdout; return the exit status."""
    import anyio

    directory = os.path.abspath(cwd if cwd is not None else os.getcwd())
    if not os.path.isdir(directory):
        sys.stderr.write(f"dsh: --cwd {directory} is not a directory\n")
        return 1
    sys.stdout.write(anyio.run(render_system_prompt, settings, directory) + "\n")
    return 0
