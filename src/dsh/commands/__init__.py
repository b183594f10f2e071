"""Slash commands: the ``commands`` service, the built-in commands and the user's Markdown commands.

See ``README.md`` for what is (and is not) here; :mod:`dsh.frontends.acp` projects commands onto ACP.
"""

from dsh.commands._builtin import builtin_commands_plugin
from dsh.commands._registry import (
    Command,
    CommandRegistry,
    CommandResult,
    Invocation,
    SessionControls,
    commands_plugin,
)
from dsh.commands._run import match_command, run_command

__all__ = [
    "Command",
    "CommandRegistry",
    "CommandResult",
    "Invocation",
    "SessionControls",
    "builtin_commands_plugin",
    "commands_plugin",
    "match_command",
    "run_command",
]
