"""Slash commands: the ``commands`` service, the built-in commands and the user's Markdown commands.

See ``README.md`` for what is (and is not) here; :mod:`dsh.frontends.acp` projects commands onto ACP.
"""

from dsh.commands._builtin import CONTEXT_RESET, builtin_commands_plugin
from dsh.commands._markdown import expand, markdown_commands
from dsh.commands._registry import (
    Command,
    CommandRegistry,
    CommandResult,
    Invocation,
    SessionControls,
    commands_plugin,
)
from dsh.commands._run import COMMAND_OUTPUT, match_command, run_command

__all__ = [
    "COMMAND_OUTPUT",
    "CONTEXT_RESET",
    "Command",
    "CommandRegistry",
    "CommandResult",
    "Invocation",
    "SessionControls",
    "builtin_commands_plugin",
    "commands_plugin",
    "expand",
    "markdown_commands",
    "match_command",
    "run_command",
]
