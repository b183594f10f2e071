"""What the context plugin knows about one live session (:class:`SessionContext`), shared by its parts: the
prompt sections, the accounting, compaction and the overflow retry each read and update it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anyio

from dsh.context._accounting import Accounting
from dsh.context._environment import Environment
from dsh.context._gitstatus import GitSummary
from dsh.context._instructions import Instructions

__all__ = ["INSTRUCTIONS_EVENT", "SessionContext", "SessionStates"]

INSTRUCTIONS_EVENT = "context/instructions"
"""The session event recording which instruction files the prompt uses."""


@dataclass(slots=True)
class SessionContext:
    """What the context plugin knows about one live session."""

    session_id: str
    environment: Environment | None = None
    git_summary: GitSummary | None = None
    git_ready: anyio.Event | None = None
    """Set once the git summary is known (or given up); None when there is nothing to wait for."""
    instructions: Instructions = field(default_factory=lambda: Instructions(""))
    model: str | None = None
    """The model of the session's last step (after every ``agent/request`` listener)."""
    accounting: Accounting = field(default_factory=Accounting)
    turn_starts: list[int] = field(default_factory=list)
    """Seqs of the ``turn/start`` events after the last compaction's cut."""
    in_turn: bool = False
    turn_start: int | None = None
    """Seq of the running turn's ``turn/start`` (None between turns)."""
    step_starts: list[int] = field(default_factory=list)
    """Seqs of the running turn's ``step/start`` events (a compaction may cut at one of them)."""
    pruned: set[int] = field(default_factory=set)
    """Seqs of the ``tool/result`` events a ``context/prune`` already stubbed."""
    spills: dict[int, str] = field(default_factory=dict)
    """Seq of a ``tool/result`` → the file its full output was spilled to (its data's ``spill``)."""
    compacted_upto: int = 0
    failed_turn: int | None = None
    """The turn in which a threshold compaction failed (not retried before the next turn)."""
    tools_section: str = ""
    """The tools section the session's last assembly rendered (from the global tools)."""
    recorded_files: list[str] | None = None
    """The instruction files last recorded in the session log (``context/instructions``)."""
    extra: dict[str, Any] = field(default_factory=dict)


SessionStates = dict[str, SessionContext]
"""Session id → its state; one mapping shared by the plugin's parts (entries added on ``agent/created``, removed
on ``agent/disposed``)."""
