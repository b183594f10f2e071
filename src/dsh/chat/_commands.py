"""The chat's own slash commands, beside the agent's.

``/quit`` and ``/exit`` end the chat; ``/model`` and ``/mode`` without an argument open a picker over the
session's config options (with an argument naming a choice they set it, anything else goes to the agent as
typed, so the agent's own ``/model`` and ``/mode`` commands still work); ``/thoughts`` shows or hides the
model's thoughts. Every other ``/`` line is the agent's business and is sent as typed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dsh.chat._state import SessionState

__all__ = ["LOCAL_COMMANDS", "LocalCommand", "all_commands", "parse_local"]

LOCAL_COMMANDS: dict[str, str] = {
    "model": "Pick the model",
    "mode": "Pick the mode",
    "thoughts": "Show or hide the model's thoughts",
    "quit": "Leave the chat (also Ctrl+D)",
}


@dataclass(frozen=True)
class LocalCommand:
    name: str
    argument: str


def parse_local(text: str, state: SessionState) -> LocalCommand | None:
    """The local command *text* is, or None when it goes to the agent. ``/model x`` is local only when ``x`` is
    one of the session's model choices (by value or name)."""
    if not text.startswith("/"):
        return None
    name, _, argument = text[1:].strip().partition(" ")
    argument = argument.strip()
    if name in ("quit", "exit"):
        return LocalCommand("quit", "")
    if name == "thoughts":
        return LocalCommand(name, argument)
    if name in ("model", "mode"):
        choices = state.choices(name)
        if not choices:
            return None
        if not argument:
            return LocalCommand(name, "")
        for value, label, _ in choices:
            if argument in (value, label):
                return LocalCommand(name, value)
    return None


def all_commands(state: SessionState) -> list[tuple[str, str, str]]:
    """``(name, description, hint)`` for completion: the agent's commands, then the chat's own it lacks."""
    out: list[tuple[str, str, str]] = []
    for command in state.commands:
        raw = command.get("input")
        hint: dict[str, Any] = raw if isinstance(raw, dict) else {}
        out.append((str(command["name"]), str(command.get("description") or ""), str(_get(hint, "hint"))))
    names = {name for name, _, _ in out}
    out += [(name, description, "") for name, description in LOCAL_COMMANDS.items() if name not in names]
    return out


def _get(mapping: dict[str, Any], key: str) -> str:
    value = mapping.get(key)
    return value if isinstance(value, str) else ""
