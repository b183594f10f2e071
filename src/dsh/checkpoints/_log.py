"""What a session's log says about its turns, their checkpoints and its rewinds: pure functions over events.

The log keeps everything; a ``context/rewind`` event ``{to}`` takes the events from seq ``to`` up to itself out
of view (the model's messages, the turns ``/rewind`` lists, a ``session/load`` replay). Turns are numbered by
their place among the turns still in view, from 1, as ``/rewind`` lists them.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CHECKPOINT_AFTER",
    "CHECKPOINT_FILE",
    "REWIND_EVENT",
    "FileState",
    "Turn",
    "in_view",
    "last_written",
    "rewound_ranges",
    "turns",
]

CHECKPOINT_FILE = "checkpoint/file"
"""``{turn, path, existed, mode, digest}``: *path* as it was before its first change in the turn whose
``turn/start`` has seq *turn* (``digest`` of its bytes in the blob store; ``existed`` false: no such file)."""
CHECKPOINT_AFTER = "checkpoint/after"
"""``{path, existed, digest}``: what dsh left at *path* (after a tool changed it, or a rewind restored it)."""
REWIND_EVENT = "context/rewind"
"""``{to, turn}``: the events from seq *to* up to this one are out of view (turn *turn* and later)."""

_TYPE = operator.attrgetter("type")


@dataclass(frozen=True, slots=True)
class FileState:
    existed: bool
    digest: str | None = None
    mode: int | None = None

    @classmethod
    def of(cls, data: dict[str, Any]) -> FileState:
        mode = data.get("mode")
        digest = data.get("digest")
        return cls(
            bool(data.get("existed")),
            digest if isinstance(digest, str) else None,
            mode if type(mode) is int else None,
        )

    def same_content(self, other: FileState) -> bool:
        return self.existed == other.existed and (not self.existed or self.digest == other.digest)


@dataclass(slots=True)
class Turn:
    number: int
    seq: int
    """The seq of its ``turn/start``."""
    prompt: str = ""
    files: dict[str, FileState] = field(default_factory=dict)
    """Each file the turn changed, as it was before the turn (first change only)."""


def rewound_ranges(events: Sequence[Any]) -> list[tuple[int, int]]:
    """``[to, rewind seq)`` of every rewind, in log order (a C-speed count first: most logs have none)."""
    if not operator.countOf(map(_TYPE, events), REWIND_EVENT):
        return []
    return [
        (int(event.data["to"]), event.seq)
        for event in events
        if event.type == REWIND_EVENT and type(event.data.get("to")) is int
    ]


def in_view(events: Sequence[Any]) -> Sequence[Any]:
    """*events* without those a rewind took out of view (the same sequence when nothing was rewound)."""
    ranges = rewound_ranges(events)
    if not ranges:
        return events
    return [event for event in events if not any(low <= event.seq < high for low, high in ranges)]


def _prompt_text(data: dict[str, Any]) -> str:
    parts = [str(b.get("text", "")) for b in data.get("content") or () if isinstance(b, dict)]
    return " ".join(" ".join(parts).split())


def turns(events: Sequence[Any]) -> list[Turn]:
    """The turns in view (compaction turns left out), each with its prompt and the files it changed."""
    found: list[Turn] = []
    by_seq: dict[int, Turn] = {}
    current: Turn | None = None
    for event in in_view(events):
        kind = event.type
        if kind == "turn/start":
            trigger = event.data.get("trigger")
            if isinstance(trigger, dict) and trigger.get("kind") == "compaction":
                current = None
                continue
            current = Turn(len(found) + 1, event.seq)
            found.append(current)
            by_seq[event.seq] = current
        elif kind == "user/message" and current is not None and not current.prompt:
            current.prompt = _prompt_text(event.data)
        elif kind == CHECKPOINT_FILE:
            owner = by_seq.get(event.data.get("turn"))
            path = event.data.get("path")
            if owner is not None and isinstance(path, str) and path not in owner.files:
                owner.files[path] = FileState.of(event.data)
    return found


def last_written(events: Sequence[Any]) -> dict[str, FileState]:
    """What dsh last left at each path it changed (the whole log: a rewind's restores are recorded too)."""
    written: dict[str, FileState] = {}
    if not operator.countOf(map(_TYPE, events), CHECKPOINT_AFTER):
        return written
    for event in events:
        if event.type == CHECKPOINT_AFTER and isinstance(event.data.get("path"), str):
            written[event.data["path"]] = FileState.of(event.data)
    return written
