"""The terminal view (placeholder until the full view lands: line by line, like the piped view)."""

from __future__ import annotations

from dsh.chat._options import ChatOptions
from dsh.chat._piped import PipedView

__all__ = ["TtyView"]


class TtyView(PipedView):
    def __init__(self, options: ChatOptions) -> None:
        super().__init__(allow=options.yes)
