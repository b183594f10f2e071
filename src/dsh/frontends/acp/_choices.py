"""The user's choices of a session (model, mode, thought level), kept in its log so they survive a reload.

Each switch that changes a value appends one ``config/choice`` event ``{option, value}``; a loaded or resumed
session takes, per option, the last recorded value that is still valid (a model no longer offered falls back to
the default). Pure functions: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dsh.services.sessions import SessionEvent

__all__ = ["CHOICE_EVENT", "choices_from_log"]

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
