"""``allowed-tools``: what a skill lets the model call while it follows it, as a check that only refuses.

Guarantees:

* :func:`permits` is a narrowing: it answers whether a call is among the skill's tools; it is consulted only to
  refuse. A call it permits still goes through the policy (rules, mode, the user's answer) and the sandbox, so a
  skill can never widen what the session allows.
* Claude Code's tool names map to dsh's (``Bash`` → ``run_command`` and its background companions, ``Read`` →
  ``read_file``, ``Edit``/``MultiEdit`` → ``edit_file``, ``Write`` → ``write_file``, ``Grep``, ``Glob``, ``LS``,
  ``WebFetch``, ``Task``, ``TodoWrite``, ``NotebookEdit``); any other name is taken as a dsh tool name as written.
* ``Bash(prefix:*)`` / ``Bash(prefix *)`` allows only commands that are *prefix* or start with *prefix* and a space,
  and that hold none of the shell's chaining or substitution characters; ``Bash(exact)`` only that command.
* The ``skill`` tool stays callable (loading another skill can only narrow further: restrictions intersect).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

__all__ = ["CLAUDE_TOOLS", "Narrowing", "permits"]

CLAUDE_TOOLS: dict[str, tuple[str, ...]] = {
    "Bash": ("run_command", "command_output", "command_wait", "command_kill"),
    "Read": ("read_file",),
    "Edit": ("edit_file",),
    "MultiEdit": ("edit_file",),
    "Write": ("write_file",),
    "Grep": ("grep",),
    "Glob": ("glob",),
    "LS": ("list_files",),
    "WebFetch": ("fetch_url",),
    "Task": ("task",),
    "TodoWrite": ("update_plan",),
    "NotebookEdit": ("notebook_edit",),
}
_QUALIFIED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\((.*)\)\Z", re.S)
_SHELL_SPECIAL = re.compile(r"[;&|`$<>(){}\n\\]")

Narrowing = tuple[str, ...]
"""A skill's ``allowed-tools`` entries as written."""


def _command_fits(pattern: str, command: str) -> bool:
    command = command.strip()
    if _SHELL_SPECIAL.search(command):
        return False
    pattern = pattern.strip()
    for suffix in (":*", " *", "*"):
        if pattern.endswith(suffix):
            prefix = pattern[: -len(suffix)].strip()
            return command == prefix or command.startswith(prefix + " ")
    return command == pattern


def _one(entry: str, tool: str, arguments: Any) -> bool:
    if tool == "skill":
        return True
    qualified = _QUALIFIED.match(entry.strip())
    if qualified is None:
        return tool in CLAUDE_TOOLS.get(entry.strip(), (entry.strip(),))
    name, pattern = qualified.group(1), qualified.group(2)
    if tool not in CLAUDE_TOOLS.get(name, (name,)):
        return False
    if tool != "run_command":
        return True  # a qualifier of another tool (a path pattern) is not read: the policy still judges the path
    command = arguments.get("command") if isinstance(arguments, dict) else None
    return isinstance(command, str) and _command_fits(pattern, command)


def permits(narrowings: Iterable[Narrowing], tool: str, arguments: Any) -> bool:
    """Whether a call of *tool* with *arguments* fits every one of *narrowings* (each a skill's list)."""
    return all(any(_one(entry, tool, arguments) for entry in narrowing) or tool == "skill" for narrowing in narrowings)
