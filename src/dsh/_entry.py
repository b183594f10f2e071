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


class _Interrupted(BaseException):
    """SIGINT or SIGTERM while ``dsh exec`` starts or ends (not while its run's own receiver holds the signals)."""


def _interrupted(signum: int, frame: object) -> None:
    raise _Interrupted


def _exec_main() -> None:
    """``dsh exec``: a SIGINT or SIGTERM at any moment ends with exit 130 and, with ``--json``, one result line.
    While the run is under way its own receiver handles them (cancel the turn, then the result); before that
    (imports, parsing, start-up) and after it, this handler does: typer would turn a ``KeyboardInterrupt`` into
    "Aborted!" and exit 1, and an early one used to end in a traceback."""
    import signal

    signal.signal(signal.SIGINT, _interrupted)
    signal.signal(signal.SIGTERM, _interrupted)
    try:
        from dsh.cli import main as cli_main

        code = cli_main()
    except (_Interrupted, KeyboardInterrupt):
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the result line is written whole
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        run = sys.modules.get("dsh.frontends.headless._run")
        if run is None or not run.result_written():
            if "--json" in sys.argv[2:]:
                import json

                line: dict[str, object] = {"type": "result", "stopReason": "cancelled", "text": "", "usage": {}}
                line |= {"cost": None, "sessionId": None, "filesChanged": [], "denied": [], "steps": 0}
                try:
                    sys.stdout.write(json.dumps(line, separators=(",", ":")) + "\n")
                    sys.stdout.flush()
                except OSError:
                    pass
            sys.stderr.write("\ndsh exec: interrupted before the task started\n")
        code = 130
    sys.exit(code)


def main() -> None:
    if sys.argv[1:] == ["acp"]:
        from dsh.frontends.acp import DaemonOptions, note_if_terminal, run
        from dsh.settings import exit_on_error

        with exit_on_error():
            options = DaemonOptions.resolve()
        note_if_terminal()
        sys.exit(run(options))
    if sys.argv[1:2] == ["chat"]:  # started by hand, often: its own small parser, not typer's (dsh.chat._cli)
        if {"--help", "-h"} & set(sys.argv[2:]):
            from dsh.cli import main as cli_main  # typer's help, drawn like every other command's

            sys.exit(cli_main(["chat", "--help"]))
        from dsh.chat import main as chat_main

        sys.exit(chat_main(sys.argv[2:]))
    if sys.argv[1:2] in (["exec"], ["prompt"]):
        _exec_main()
    from dsh.cli import main as cli_main

    sys.exit(cli_main())
