"""The user's choices of a session (model, mode, thought level), kept in its log so they survive a reload.

Each switch that changes a value appends one ``config/choice`` event ``{option, value}``; a loaded or resumed
session takes, per option, the last recorded value that is still valid (a model no longer offered falls back to
the default). Pure functions: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dsh.services.sessions import SessionEvent

__all__ = ["CHOICE_EVENT", "choices_from_log", "current_level", "thought_option"]

CHOICE_EVENT = "config/choice"


def choices_from_log(events: Iterable[SessionEvent]) -> dict[str, str]:
    """The last recorded value of each option."""
    choices: dict[str, str] = {}
    for event in events:
        if event.type == CHOICE_EVENT:
            option, value = event.data.get("option"), event.data.get("value")
            if isinstance(option, str) and isinstance(value, str):
                choices[option] = value
    return choices


def current_level(levels: Sequence[str], picked: str | None) -> str | None:
    """The reasoning effort in force: the one picked when the model takes it, else ``medium`` when offered, else
    the first level; None for a model that takes none."""
    if not levels:
        return None
    if picked in levels:
        return picked
    return "medium" if "medium" in levels else levels[0]


def thought_option(levels: Sequence[str], picked: str | None) -> list[dict[str, Any]]:
    """The ACP config option of category ``thought_level`` (none for a model without levels)."""
    level = current_level(levels, picked)
    if level is None:
        return []
    return [
        {
            "id": "thought_level",
            "name": "Reasoning effort",
            "category": "thought_level",
            "type": "select",
            "currentValue": level,
            "options": [{"value": value, "name": value.capitalize()} for value in levels],
        }
    ]
