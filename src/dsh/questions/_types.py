"""A question to the user, and its answer: what the ``user/ask`` seam carries."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dsh.kernel import CancelToken

__all__ = ["Answer", "Choice", "Question"]


@dataclass(frozen=True, slots=True)
class Choice:
    id: str
    label: str


@dataclass(frozen=True, slots=True)
class Question:
    """``purpose``: ``question`` (ask_user) or ``switch_mode`` (leaving plan mode: the choices are mode ids)."""

    session_id: str
    call_id: str
    text: str
    choices: tuple[Choice, ...] = ()
    purpose: str = "question"
    signal: CancelToken | None = None


@dataclass(frozen=True, slots=True)
class Answer:
    """Exactly one of: ``choice`` (a choice's id), ``text`` (a free answer), or neither, with ``reason`` saying
    why there is no answer (declined, cancelled, nobody to ask)."""

    choice: str | None = None
    text: str | None = None
    reason: str | None = None

    @property
    def answered(self) -> bool:
        return self.choice is not None or self.text is not None
