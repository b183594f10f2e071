"""The session modes, defined once: ids, names, the editor-facing descriptions and the model-facing text.

| mode             | reads, searches, read-only commands | edits   | other commands | paths outside the roots |
|------------------|-------------------------------------|---------|----------------|-------------------------|
| ``default``      | allowed                             | ask     | ask            | ask                     |
| ``accept-edits`` | allowed                             | allowed | ask            | ask                     |
| ``plan``         | allowed                             | refused | refused        | refused                 |
| ``bypass``       | allowed                             | allowed | allowed        | allowed                 |

Front ends render this table (the ACP mode picker, ``dsh prompt --mode``); the context plugin's mode section sends
``Mode.prompt`` to the model. Nothing else spells a mode's name or text.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["DEFAULT_MODE", "MODES", "MODE_IDS", "Mode", "mode_named"]


class Mode(NamedTuple):
    id: str
    name: str
    description: str
    """For the user (the editor's mode picker)."""
    prompt: str
    """For the model (the system prompt's mode section)."""


MODES: tuple[Mode, ...] = (
    Mode(
        "default",
        "Default",
        "Ask before edits and commands",
        "Default: you may read and search freely; each file edit and each command is shown to the user, who approves it before it runs. A declined call did not run: do not repeat it unchanged.",
    ),
    Mode(
        "accept-edits",
        "Accept edits",
        "Edits are allowed; commands ask first",
        "Accept edits: file edits inside the project are applied without asking; commands still need the user's approval.",
    ),
    Mode(
        "plan",
        "Plan",
        "Read-only: edit and command tools are refused",
        "Plan: read-only. Reading and searching are allowed; editing files and running commands are refused. Investigate, then propose a concrete plan (the files and the changes you would make, and how you would check them) and wait for the user to approve it and leave plan mode.",
    ),
    Mode(
        "bypass",
        "Bypass permissions",
        "Never ask",
        "Bypass permissions: every tool call runs without asking. Take extra care with destructive or irreversible actions.",
    ),
)
MODE_IDS = frozenset(mode.id for mode in MODES)
DEFAULT_MODE = "default"


def mode_named(mode_id: str) -> Mode | None:
    """The mode *mode_id*, or None."""
    return next((mode for mode in MODES if mode.id == mode_id), None)
