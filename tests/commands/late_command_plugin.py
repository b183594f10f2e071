"""A test plugin (loaded with ``DSH_PLUGINS``): a tool that registers the command ``/late`` when the model calls it,
so a test can watch the offered set change mid-session."""

from __future__ import annotations

from typing import Any

from dsh.commands import CommandResult, Invocation
from dsh.kernel import Context, plugin
from dsh.services.tools import ToolDefinition, ToolExecution


async def _late(invocation: Invocation) -> CommandResult:
    return CommandResult(text=f"late says {invocation.args}")


@plugin("late_command", inject=("tools", "commands"))
def plugin_(ctx: Context, config: object) -> None:
    async def register(arguments: Any, execution: ToolExecution) -> str:
        ctx.commands.register("late", "Registered mid-session", _late, "<words>")
        return "registered"

    ctx.tools.register(ToolDefinition("register_late", "Register /late.", {"type": "object"}, register))
