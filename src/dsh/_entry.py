"""The ``dsh`` and ``dsh-agent`` console scripts and ``python -m dsh``.

Editors spawn ``dsh acp`` without arguments, often, and wait for ``initialize``. Importing typer and letting it
parse costs about 150 ms per start (typer builds a pydantic adapter for every option), half the start-up
budget. A bare ``dsh acp`` therefore starts the daemon directly; it means exactly what typer would make of it
(every setting from its environment variable, the configuration file or its default, resolved in one place:
:func:`dsh.settings.resolve_settings`). Every other command line goes through the typer application in
:mod:`dsh.cli`. Both paths end a bad setting with one line on stderr and status 2 or 1, never a traceback.
"""

from __future__ import annotations

import sys

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


def main() -> None:
    if sys.argv[1:] == ["acp"]:
        from dsh.frontends.acp import DaemonOptions, run
        from dsh.settings import exit_on_error

        with exit_on_error():
            options = DaemonOptions.resolve()
        note_if_terminal()
        sys.exit(run(options))
    if sys.argv[1:2] == ["chat"]:  # started by hand, often: its own small parser, not typer's (dsh.chat._cli)
        from dsh.chat import main as chat_main

        sys.exit(chat_main(sys.argv[2:]))
    from dsh.cli import main as cli_main

    sys.exit(cli_main())
