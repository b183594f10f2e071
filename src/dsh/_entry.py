"""The ``dsh`` console script and ``python -m dsh``.

Editors spawn ``dsh acp`` without arguments, often, and wait for ``initialize``. Importing typer and letting it
parse costs about 150 ms per start (typer builds a pydantic adapter for every option), half the start-up
budget. A bare ``dsh acp`` therefore starts the daemon directly; it means exactly what typer would make of it
(every option from its environment variable or its default, resolved in one place:
``DaemonOptions.resolve``). Every other command line goes through the typer application in :mod:`dsh.cli`.
"""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:] == ["acp"]:
        from dsh.frontends.acp import DaemonOptions, run

        sys.exit(run(DaemonOptions.resolve()))
    from dsh.cli import app

    app()
