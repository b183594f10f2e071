"""``dsh acp`` started by a person in a terminal: one line pointing to ``dsh chat`` (the daemon still serves)."""

from __future__ import annotations

import sys

__all__ = ["ACP_ON_A_TERMINAL", "note_if_terminal"]

ACP_ON_A_TERMINAL = (
    "dsh acp: this is the ACP agent editors start (it speaks JSON-RPC on stdin and stdout); "
    "to chat in this terminal, run `dsh chat` (Ctrl+D ends this)\n"
)


def note_if_terminal() -> None:
    """``dsh acp`` typed by a person: one line on stderr pointing to ``dsh chat``; the daemon still serves (an
    editor never gives it a terminal, so editors never see the line)."""
    try:
        if sys.stdin.isatty():
            sys.stderr.write(ACP_ON_A_TERMINAL)
            sys.stderr.flush()
    except (AttributeError, ValueError):
        pass
