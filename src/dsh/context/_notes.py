"""Session facts that can change mid-session (the mode, the date) told as messages, not in the system prompt.

A provider's prompt cache reuses the longest byte-identical prefix of a request: a system prompt that names the
mode or the date changes at its start whenever they change, and the whole conversation after it is paid again.
So the system prompt holds only what is fixed for the session, and the facts that move reach the model as a
short ``context/message`` (``source: {"kind": "session"}``, the facts themselves under ``facts``) appended at the
point of change: each request's bytes are then the previous request's plus what was added, except at compaction.

Guarantees:

* On ``agent/request`` (after every other listener and after a compaction), when the session's facts differ
  from the last note's, or no note is in the model's view any more (none yet, or a compaction, a rewind or a
  ``/clear`` removed it), one note is appended and the request's messages are derived again. The first note of
  a session says everything (date, mode); a later one says only what changed.
* The last note is found again when a session is loaded (its ``facts``), so a resumed session is told nothing
  twice. Nothing here runs on the chunk path; the per-step cost is a dictionary comparison.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import date
from typing import TYPE_CHECKING, Any

from dsh.context._sections import MODE_TEXTS

if TYPE_CHECKING:
    from dsh.context._modes import ModeLookup
    from dsh.context._state import SessionContext
    from dsh.services.agents import Agent
    from dsh.services.llm import GenerateRequest
    from dsh.services.sessions import Session, SessionEvent

__all__ = ["NOTE_KIND", "SESSION_NOTE_OPENING", "SessionNotes", "note_text"]

NOTE_KIND = "session"
"""The ``source.kind`` of the notes (``<context source="session">`` in the model's view)."""
SESSION_NOTE_OPENING = f'<context source="{NOTE_KIND}">'
"""The first block of a note's message as the session derives it."""
_STALE = frozenset({"context/compaction", "context/rewind", "context/reset"})


@dataclass(slots=True)
class _Told:
    facts: dict[str, str] | None = None
    """What the last note in view said (None: nothing in view)."""


def _mode_words(mode: str) -> str:
    return MODE_TEXTS.get(mode, f"{mode}.")


def note_text(before: dict[str, str] | None, now: dict[str, str]) -> str:
    """The note for *now* after *before* (None: the first, saying everything)."""
    lines: list[str] = []
    if before is None or before.get("date") != now.get("date"):
        lines.append(f"Today's date: {now['date']}." if before is None else f"Today's date is now {now['date']}.")
    mode = now.get("mode")
    if mode is not None and (before is None or before.get("mode") != mode):
        lead = "The session is in" if before is None or "mode" not in before else "The user switched the session to"
        lines.append(f"{lead} {_mode_words(mode)}")
    return "\n".join(lines)


class SessionNotes:
    """The facts each session was last told and the notes that keep them current (see the module docstring)."""

    def __init__(self, modes: ModeLookup, today: Callable[[], date] = date.today) -> None:
        self._modes = modes
        self._today = today

    @staticmethod
    def _told(state: SessionContext) -> _Told:
        told = state.extra.get("told")
        if not isinstance(told, _Told):
            told = state.extra["told"] = _Told()
        return told

    def replay(self, state: SessionContext, session: Session) -> None:
        """A loaded session: the facts of its last note still in view (one walk back over the log, at open)."""
        told = self._told(state)
        for event in reversed(session.events_without_chunks()):
            if event.type in _STALE:
                return
            facts = _facts_of(event)
            if facts is not None:
                told.facts = facts
                return

    def on_event(self, state: SessionContext, event: SessionEvent) -> None:
        """``session/event``: a note appended sets the told facts; a compaction, rewind or reset clears them."""
        if event.type in _STALE:
            self._told(state).facts = None
        else:
            facts = _facts_of(event)
            if facts is not None:
                self._told(state).facts = facts

    def facts(self, session_id: str) -> dict[str, str]:
        facts = {"date": self._today().isoformat()}
        mode = self._modes.mode_of(session_id)
        if mode is not None:
            facts["mode"] = mode
        return facts

    def update(self, agent: Agent, state: SessionContext, request: GenerateRequest) -> GenerateRequest:
        """Append a note when the facts moved or none is in view, and hand back the request with it."""
        now = self.facts(agent.session.id)
        before = self._told(state).facts
        if before == now:
            return request
        content: list[Any] = [{"type": "text", "text": note_text(before, now)}]
        agent.session.append("context/message", {"content": content, "source": {"kind": NOTE_KIND}, "facts": now})
        return replace(request, messages=agent.session.derive_messages())


def _facts_of(event: SessionEvent) -> dict[str, str] | None:
    if event.type != "context/message":
        return None
    data = event.data
    source = data.get("source")
    facts = data.get("facts")
    if isinstance(source, dict) and source.get("kind") == NOTE_KIND and isinstance(facts, dict):
        return {str(k): str(v) for k, v in facts.items()}
    return None
