"""The built-in commands: ``/help``, ``/status``, ``/model``, ``/mode``, ``/clear``, ``/init`` and ``/compact``.

Each one produces visible text (or, for ``/init``, a prompt for the model); none of them changes anything a
picker could not change: ``/model`` and ``/mode`` switch through the front end's :class:`SessionControls`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from dsh.commands._registry import CommandResult, Invocation
from dsh.kernel import plugin

if TYPE_CHECKING:
    from dsh.kernel import Context

__all__ = ["CONTEXT_RESET", "INIT_PROMPT", "builtin_commands_plugin"]

CONTEXT_RESET = "context/reset"
INIT_PROMPT = (
    "Look at this project (its layout, build files, tests, README, and any AGENTS.md or CLAUDE.md already there) "
    "and write or improve AGENTS.md at the repository root: how to build, test and lint it, the layout, the "
    "conventions a coding agent must follow, and anything surprising. Keep it concise and factual; preserve what "
    "an existing file says unless it is wrong. Tell me what you changed."
)


async def _help(invocation: Invocation) -> CommandResult:
    lines = ["Commands:"]
    for command in invocation.commands:
        hint = f" {command.input_hint}" if command.input_hint else ""
        lines.append(f"- /{command.name}{hint} — {command.description}")
    return CommandResult(text="\n".join(lines))


def _plan_lines(invocation: Invocation) -> list[str]:
    event = invocation.agent.session.last("plan/update")
    entries: list[Any] = event.data.get("entries", []) if event is not None else []
    if not entries:
        return []
    marks = {"completed": "[x]", "in_progress": "[~]"}
    return ["Plan:"] + [f"  {marks.get(e.get('status'), '[ ]')} {e.get('content', '')}" for e in entries]


async def _status(invocation: Invocation) -> CommandResult:
    controls = invocation.controls
    rows = [
        ("Session", controls.session_id),
        ("Directory", controls.cwd),
        ("Model", controls.model),
        ("Mode", controls.mode),
        *controls.status(),
    ]
    lines = [f"{label}: {value}" for label, value in rows]
    return CommandResult(text="\n".join(lines + _plan_lines(invocation)))


async def _pick(
    invocation: Invocation,
    what: str,
    listing: list[tuple[str, str]],
    current: str,
    switch: Callable[[str], None],
) -> CommandResult:
    """``/model`` and ``/mode``: list *listing* (``(id, label)``) marking *current*, or switch to the argument."""
    wanted = invocation.args.strip()
    if not wanted:
        lines = [f"{what.capitalize()}s (switch with /{what} <id>):"]
        lines += [f"- {label}{' (current)' if key == current else ''}" for key, label in listing]
        return CommandResult(text="\n".join(lines))
    try:
        switch(wanted)
    except ValueError as exc:
        return CommandResult(text=str(exc))
    return CommandResult(text=f"{what.capitalize()} switched to {wanted}.")


async def _model(invocation: Invocation) -> CommandResult:
    controls = invocation.controls
    listing = [(model, model if name == model else f"{model} — {name}") for model, name in controls.models()]
    return await _pick(invocation, "model", listing, controls.model, controls.switch_model)


async def _mode(invocation: Invocation) -> CommandResult:
    controls = invocation.controls
    listing = [(mode, f"{mode} — {name}: {text}") for mode, name, text in controls.modes()]
    return await _pick(invocation, "mode", listing, controls.mode, controls.switch_mode)


async def _clear(invocation: Invocation) -> CommandResult:
    invocation.agent.session.append(CONTEXT_RESET, {})
    return CommandResult(
        text="Context cleared: the model sees nothing from before this point. The transcript and the session file "
        "keep everything."
    )


async def _init(invocation: Invocation) -> CommandResult:
    extra = invocation.args.strip()
    text = INIT_PROMPT + (f"\n\nAlso: {extra}" if extra else "")
    return CommandResult(prompt=[{"type": "text", "text": text}])


async def _compact(invocation: Invocation) -> CommandResult:
    compact = getattr(invocation.agent, "compact", None)
    if compact is None:
        return CommandResult(text="Compaction is not available in this session.")
    outcome = await compact(instructions=invocation.args.strip() or None)
    if not outcome:  # agent.compact(): None when there is nothing older than the recent turns to summarise
        return CommandResult(text="Nothing to compact yet: the conversation is only its most recent turns.")
    tokens = outcome.get("tokens_after") if isinstance(outcome, dict) else None
    return CommandResult(
        text=f"Conversation compacted (about {tokens} tokens now)."
        if isinstance(tokens, int)
        else "Conversation compacted."
    )


BUILTINS: tuple[tuple[str, str, Any, str | None], ...] = (
    ("help", "List the commands", _help, None),
    ("status", "Show the session's model, mode, directory, context and servers", _status, None),
    ("model", "List the models, or switch to one", _model, "[model id]"),
    ("mode", "List the modes, or switch to one", _mode, "[mode id]"),
    ("compact", "Summarise the conversation so far to free context", _compact, "[instructions]"),
    ("clear", "Start afresh: the model forgets the conversation (the transcript keeps it)", _clear, None),
    ("init", "Ask the agent to write or improve the project's AGENTS.md", _init, "[extra instructions]"),
)


@plugin("builtin_commands", inject=("commands",))
def builtin_commands_plugin(ctx: Context, config: object) -> None:
    for name, description, handler, hint in BUILTINS:
        ctx.commands.register(name, description, handler, hint)
