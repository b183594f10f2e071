"""``dsh chat``: a terminal client for dsh, or for any ACP agent (``--agent``).

The chat starts the agent as a subprocess and speaks ACP to it over its stdin and stdout; it never talks to the
loop directly. On a terminal it draws with rich and reads with prompt_toolkit (both imported only when the chat
runs); without one it reads one prompt per line and prints plain text. See ``README.md`` here and RFC 0021.
"""

from __future__ import annotations

from dsh.chat._cli import main
from dsh.chat._options import ChatOptions

__all__ = ["ChatOptions", "main", "run"]


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
