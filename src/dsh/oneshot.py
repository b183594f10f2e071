"""``dsh prompt``: one prompt through the real loop, answer streamed to stdout.

It is also the smallest complete example of a front end: it programs against ``ctx.agents`` and the event
catalogue only, never against the loop package.
"""

from __future__ import annotations

import os
import sys
import uuid
from typing import TYPE_CHECKING

from dsh import events as ev
from dsh.app import load_core
from dsh.events import TurnEndReason
from dsh.kernel import App
from dsh.services.agents import Agent, AgentOptions
from dsh.services.llm import StreamChunk

if TYPE_CHECKING:
    from dsh.kernel import Context
    from dsh.settings import Settings

__all__ = ["run_prompt"]


async def run_prompt(text: str, settings: Settings) -> int:
    """Return the process exit code: 0 for a completed turn, 1 otherwise (the reason goes to stderr), 2 for a
    model no adapter serves (named on stderr with the providers there are). *settings* are the command's
    (:func:`dsh.settings.resolve_settings`): its model, system prompt, log settings and the file's providers."""
    from dsh._log import open_log
    from dsh.context import context_from_file

    outcome: list[TurnEndReason] = []
    model, system = settings.model, settings.system_prompt
    with open_log(settings.log_level, settings.log_file):
        async with App() as app:
            ctx = app.ctx
            loaded = settings.config
            load_core(
                ctx,
                providers=loaded.providers if loaded is not None else None,
                secrets=loaded.secrets if loaded is not None else None,
                context=context_from_file(loaded),
                tools=loaded.tools if loaded is not None else None,
            )
            problem = ctx.llm.unserved(model)
            if problem is not None:
                sys.stderr.write(f"dsh: {settings.origin('model')}: {problem}\n")
                return 2
            return await _run(ctx, text, model, system, outcome)


async def _run(ctx: Context, text: str, model: str, system: str | None, outcome: list[TurnEndReason]) -> int:
    def on_chunk(agent: Agent, turn: int, step: int, chunk: StreamChunk) -> None:
        if chunk["type"] == "text-delta":
            sys.stdout.write(chunk["text"])
            sys.stdout.flush()

    def on_turn_end(agent: Agent, turn: int, reason: TurnEndReason) -> None:
        outcome.append(reason)

    ctx.on(ev.AGENT_STREAM_CHUNK, on_chunk)
    ctx.on(ev.AGENT_TURN_END, on_turn_end)
    session_id = f"prompt-{uuid.uuid4()}"
    handle = await ctx.agents.create(
        agent_id=session_id,
        session_id=session_id,
        meta={"cwd": os.getcwd()},  # the environment and project-instructions sections describe it
        agent_options=AgentOptions(model=model, system_prompt=system),
    )
    handle.agent.send([{"type": "text", "text": text}])
    await handle.agent.when_idle()
    await handle.dispose()
    sys.stdout.write("\n")
    reason = outcome[-1] if outcome else {"kind": "error", "message": "the turn did not run"}
    if reason["kind"] in ("completed", "max-tokens"):
        return 0
    sys.stderr.write(f"dsh: turn ended {reason['kind']}: {reason.get('message', reason.get('reason', ''))}\n")
    return 1
