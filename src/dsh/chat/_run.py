"""Running the chat to its end (the log opened, the event loop run); :func:`dsh.chat.run`."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dsh.chat._options import ChatOptions

__all__ = ["run"]


def run(options: ChatOptions, *, interactive: bool | None = None) -> int:
    """Run the chat to its end; the exit status."""
    import os
    import sys

    import anyio

    from dsh._log import open_log
    from dsh.chat._app import is_interactive, run_chat
    from dsh.settings import exit_on_error

    interactive = is_interactive() if interactive is None else interactive
    path = os.environ.get("DSH_LOG_FILE") or None
    # on a terminal stderr is the screen the chat draws on: logs go to DSH_LOG_FILE, or only critical ones show
    level = (os.environ.get("DSH_LOG_LEVEL") or "warning") if path or not interactive else "critical"
    try:
        with exit_on_error(), open_log(level, path):
            return anyio.run(lambda: run_chat(options, interactive=interactive))
    except ValueError as error:  # an unknown DSH_LOG_LEVEL
        sys.stderr.write(f"dsh chat: DSH_LOG_LEVEL: {error}\n")
        return 2
