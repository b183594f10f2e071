"""Recognising a command in a prompt and running it, for any front end.

Guarantees:

* A prompt is a command only when its first block is text that starts with ``/<name>`` of a command the session
  offers, followed by whitespace or the end; anything else (``/usr/bin/env``, ``/unknown``) is an ordinary prompt.
* :func:`run_command` records every text-producing run as one ``command/output`` session event (name, args,
  text), made durable before it returns, so a load replays it; a handler that raises produces a visible error
  text instead (never a failed session).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from dsh import events as ev
from dsh._log import get_logger
from dsh.commands._registry import Command, CommandResult, Invocation
from dsh.errors import error_message

if TYPE_CHECKING:
    from dsh.kernel import Context

__all__ = ["COMMAND_OUTPUT", "match_command", "run_command"]

COMMAND_OUTPUT = "command/output"
_INVOCATION = re.compile(r"/([A-Za-z0-9_.:-]{1,64})(?:\s+(.*))?\Z", re.S)
log = get_logger("dsh.commands")


def match_command(prompt: Sequence[Any], commands: Sequence[Command]) -> tuple[Command, str] | None:
    """``(command, argument text)`` when *prompt* invokes one of *commands*, else None."""
    if not prompt or not isinstance(prompt[0], dict) or prompt[0].get("type") != "text":
        return None
    text = str(prompt[0].get("text", "")).strip()
    match = _INVOCATION.match(text)
    if match is None:
        return None
    for command in commands:
        if command.name == match.group(1):
            return command, (match.group(2) or "").strip()
    return None


async def run_command(ctx: Context, invocation: Invocation, command: Command) -> CommandResult:
    """Run *command*; record its text in the session log (durably) before returning."""
    try:
        result = await command.handler(invocation)
    except Exception as exc:
        log.warning("command failed", command=command.name, error=error_message(exc)[:200])
        result = CommandResult(text=f"/{command.name} failed: {error_message(exc)}")
    if result.text is not None:
        session = invocation.agent.session
        session.append(COMMAND_OUTPUT, {"name": command.name, "args": invocation.args, "text": result.text})
        await ctx.parallel(ev.SESSION_FLUSH, session)
    return result
