"""What a session's log says about its turns, their checkpoints and its rewinds: pure functions over events.

The log keeps everything; a ``context/rewind`` event ``{to}`` takes the events from seq ``to`` up to itself out
of view (the model's messages, the turns ``/rewind`` lists, a ``session/load`` replay). Turns are numbered by
their place among the turns still in view, from 1, as ``/rewind`` lists them.
"""

from __future__ import annotations

import operator
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import compress
from typing import Any

__all__ = [
    "CHECKPOINT_AFTER",
    "CHECKPOINT_COMMAND",
    "CHECKPOINT_FILE",
    "REWIND_EVENT",
    "UNDO_EVENT",
    "FileState",
    "Turn",
    "in_view",
    "last_undoable",
    "last_written",
    "rewound_ranges",
    "turns",
]

CHECKPOINT_FILE = "checkpoint/file"
"""``{turn, path, existed, mode, digest}``: *path* as it was before its first change in the turn whose
``turn/start`` has seq *turn* (``digest`` of its bytes in the blob store; ``existed`` false: no such file)."""
CHECKPOINT_AFTER = "checkpoint/after"
"""``{path, existed, digest}``: what dsh left at *path* (after a tool changed it, or a rewind restored it)."""
CHECKPOINT_COMMAND = "checkpoint/command"
"""``{turn, path, call_id, existed, digest}``: a command (``run_command``) left *path*, a file dsh had changed,
different from what dsh left there; noted, never restored."""
REWIND_EVENT = "context/rewind"
"""``{to, turn, restored, forced, undo}``: the events from seq *to* up to this one are out of view (turn *turn*
and later); appended only once every file was restored. ``undo``: ``[{path, existed, digest, mode}]``, each file
as it was just before the rewind replaced it (bytes in the blob store), for ``/rewind --undo``."""
UNDO_EVENT = "checkpoint/undo"
"""``{rewind, restored, forced}``: the files the rewind whose seq is *rewind* replaced were put back."""

_TYPE = operator.attrgetter("type")
_SEQ = operator.attrgetter("seq")


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
    by_commands: list[str] = field(default_factory=list)
    """Tracked files a command of the turn changed (noted, not restored)."""


def rewound_ranges(events: Sequence[Any]) -> list[tuple[int, int]]:
    """``[to, rewind seq)`` of every rewind, in log order (C-speed passes: most logs have none, and a big log
    with one is not walked in Python)."""
    types = list(map(_TYPE, events))
    if not operator.countOf(types, REWIND_EVENT):
        return []
    return [
        (int(event.data["to"]), event.seq)
        for event in compress(events, map(REWIND_EVENT.__eq__, types))
        if type(event.data.get("to")) is int
    ]


def in_view(events: Sequence[Any]) -> Sequence[Any]:
    """*events* without those a rewind took out of view (the same sequence when nothing was rewound). Events are
    in seq order, so each rewound range is one slice found by bisection."""
    ranges = rewound_ranges(events)
    if not ranges:
        return events
    merged: list[list[int]] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], high)
        else:
            merged.append([low, high])
    seqs = list(map(_SEQ, events))
    kept: list[Any] = []
    start = 0
    for low, high in merged:
        cut = bisect_left(seqs, low)
        if cut > start:
            kept.extend(events[start:cut])
        start = max(start, bisect_left(seqs, high))
    kept.extend(events[start:])
    return kept


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
        elif kind == CHECKPOINT_COMMAND:
            owner = by_seq.get(event.data.get("turn"))
            path = event.data.get("path")
            if owner is not None and isinstance(path, str) and path not in owner.by_commands:
                owner.by_commands.append(path)
    return found


def last_undoable(events: Sequence[Any]) -> Any | None:
    """The last ``context/rewind`` event with files to put back that no ``checkpoint/undo`` undid (None)."""
    types = list(map(_TYPE, events))
    if not operator.countOf(types, REWIND_EVENT):
        return None
    undone: set[int] = set()
    for index in range(len(events) - 1, -1, -1):
        kind = types[index]
        event = events[index]
        if kind == UNDO_EVENT and type(event.data.get("rewind")) is int:
            undone.add(event.data["rewind"])
        elif kind == REWIND_EVENT:
            if event.seq in undone or not event.data.get("undo"):
                return None  # only the last rewind is undone: an earlier one's files were since rewritten
            return event
    return None


def last_written(events: Sequence[Any]) -> dict[str, FileState]:
    """What dsh last left at each path it changed (the whole log: a rewind's restores are recorded too)."""
    written: dict[str, FileState] = {}
    types = list(map(_TYPE, events))
    if not operator.countOf(types, CHECKPOINT_AFTER):
        return written
    for event in events:
        if event.type in (CHECKPOINT_AFTER, CHECKPOINT_COMMAND) and isinstance(event.data.get("path"), str):
            written[event.data["path"]] = FileState.of(event.data)
    return written
