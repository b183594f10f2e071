"""Checkpoints of the files dsh changes, ``/rewind`` (files and conversation), and what a log says about them.

See :mod:`._plugin` for the guarantees, :mod:`._log` for the events, and ``README.md`` for what is not here.
"""

from __future__ import annotations

from dsh.checkpoints._log import in_view, turns
from dsh.checkpoints._plugin import OWNER_SUFFIX, checkpoints_plugin

__all__ = [
    "OWNER_SUFFIX",
    "checkpoints_plugin",
    "in_view",
    "turns",
]
