"""The ``dsh`` command line (typer). Subcommands import what they need when they run, so ``dsh --help`` and the
daemon's start-up pay only for what they use.

Output discipline: a subcommand's own result goes to stdout; diagnostics go to stderr. The ``acp`` subcommand
owns stdout for protocol frames only.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

app = typer.Typer(
    name="dsh",
    help="dsh: an ACP agent harness. Editors spawn `dsh acp`; `dsh prompt` runs one prompt in the terminal.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.command()
def prompt(
    text: Annotated[str, typer.Argument(help="The prompt to send.")],
    model: Annotated[str, typer.Option(help="Model to use (provider:model).", envvar="DSH_MODEL")] = "echo",
    system: Annotated[str | None, typer.Option(help="Extra system prompt.")] = None,
) -> None:
    """Run one prompt through the agent loop and stream the answer to stdout."""
    import anyio

    from dsh.oneshot import run_prompt

    code = anyio.run(run_prompt, text, model, system)
    raise typer.Exit(code)


@app.command()
def acp(
    model: Annotated[str, typer.Option(help="Model for new sessions (provider:model).", envvar="DSH_MODEL")] = "echo",
    system: Annotated[str | None, typer.Option(help="Extra system prompt for new sessions.")] = None,
    log_level: Annotated[str, typer.Option(help="debug, info, warning or error.", envvar="DSH_LOG_LEVEL")] = "warning",
    log_file: Annotated[str | None, typer.Option(help="Append logs to this file instead of stderr.")] = None,
) -> None:
    """Run the ACP daemon on stdin/stdout (what editors spawn)."""
    from dsh.frontends.acp import DaemonOptions, run

    raise typer.Exit(run(DaemonOptions(model=model, system_prompt=system, log_level=log_level, log_file=log_file)))


@app.command()
def version() -> None:
    """Print the version."""
    from dsh import __version__

    sys.stdout.write(f"dsh {__version__}\n")


def main() -> None:
    """Run the typer application (the console script goes through :mod:`dsh._entry` first)."""
    app()
