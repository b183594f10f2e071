"""Checkpoints of the files dsh changes, ``/rewind`` (files and conversation), and what a log says about them.

See :mod:`._plugin` for the guarantees, :mod:`._log` for the events, and ``README.md`` for what is not here.
"""

from __future__ import annotations

from dsh.checkpoints._log import (
    CHECKPOINT_AFTER,
    CHECKPOINT_FILE,
    REWIND_EVENT,
    FileState,
    Turn,
    in_view,
    rewound_ranges,
    turns,
)
from dsh.checkpoints._plugin import OWNER_SUFFIX, Checkpoints, checkpoints_plugin, owner_of

__all__ = [
    "CHECKPOINT_AFTER",
    "CHECKPOINT_FILE",
    "OWNER_SUFFIX",
    "REWIND_EVENT",
    "Checkpoints",
    "FileState",
    "Turn",
    "checkpoints_plugin",
    "in_view",
    "owner_of",
    "rewound_ranges",
    "turns",
]
