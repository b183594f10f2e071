"""The ``dsh`` command line (typer). Subcommands import what they need when they run, so ``dsh --help`` and the
daemon's start-up pay only for what they use.

Output discipline: a subcommand's own result goes to stdout; diagnostics go to stderr. The ``acp`` subcommand
owns stdout for protocol frames only.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from dsh.app import DEFAULT_MODEL
from dsh.mcp._cli import mcp_app

if TYPE_CHECKING:
    from pathlib import Path

    from dsh.config import DshConfig

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
    model: Annotated[str, typer.Option(help="Model to use (provider:model).", envvar="DSH_MODEL")] = DEFAULT_MODEL,
    system: Annotated[str | None, typer.Option(help="Extra system prompt.")] = None,
) -> None:
    """Run one prompt through the agent loop and stream the answer to stdout."""
    import anyio

    from dsh.oneshot import run_prompt

    code = anyio.run(run_prompt, text, model, system)
    raise typer.Exit(code)


@app.command()
def acp(
    model: Annotated[
        str | None,
        typer.Option(help="Model for new sessions (provider:model) \\[env DSH_MODEL; config `model`; default echo]."),
    ] = None,
    system: Annotated[
        str | None,
        typer.Option(help="Extra system prompt for new sessions \\[env DSH_SYSTEM_PROMPT; config `system_prompt`]."),
    ] = None,
    log_level: Annotated[
        str | None, typer.Option(help="debug, info, warning or error \\[env DSH_LOG_LEVEL; default warning].")
    ] = None,
    log_file: Annotated[
        str | None, typer.Option(help="Append logs to this file instead of stderr \\[env DSH_LOG_FILE].")
    ] = None,
    data_dir: Annotated[
        str | None,
        typer.Option(
            help="Session storage \\[env DSH_DATA_DIR; config `data_dir`; default ~/.local/share/dsh/sessions]."
        ),
    ] = None,
    config: Annotated[
        str | None,
        typer.Option(
            "--config",
            metavar="PATH",
            help="Configuration file \\[env DSH_CONFIG; default ~/.config/dsh/config.yaml if it exists].",
        ),
    ] = None,
) -> None:
    """Run the ACP daemon on stdin/stdout (what editors spawn)."""
    from dsh.frontends.acp import DaemonOptions, run

    options = DaemonOptions.resolve(
        model=model, system_prompt=system, log_level=log_level, log_file=log_file, data_dir=data_dir, config=config
    )
    raise typer.Exit(run(options))


@app.command()
def version() -> None:
    """Print the version."""
    from dsh import __version__

    sys.stdout.write(f"dsh {__version__}\n")


sessions_app = typer.Typer(
    help="Stored sessions: list, show, export and delete them. Reading never locks or changes a session file.",
    no_args_is_help=True,
)
app.add_typer(sessions_app, name="sessions")

DataDirOption = Annotated[
    str | None,
    typer.Option(
        "--data-dir",
        metavar="DIR",
        envvar="DSH_DATA_DIR",
        help="Session store (default: $XDG_DATA_HOME/dsh/sessions).",
    ),
]
SessionIdArgument = Annotated[str, typer.Argument(metavar="ID", help="The session id.")]


@sessions_app.command("list")
def sessions_list(
    data_dir: DataDirOption = None,
    cwd: Annotated[str | None, typer.Option(metavar="DIR", help="Only sessions started in DIR.")] = None,
) -> None:
    """One line per stored session, newest first: id, last update, working directory, title."""
    import anyio

    from dsh.frontends import sessions_cli

    with sessions_cli.reported_errors():
        root = sessions_cli.resolve_data_dir(data_dir)
        infos = anyio.run(sessions_cli.list_sessions, root, cwd)
        if not infos:
            where = f"for {cwd} " if cwd is not None else ""
            typer.echo(f"No sessions {where}in {root}.")
            return
        typer.echo(sessions_cli.render_list(infos), nl=False)


@sessions_app.command("show")
def sessions_show(session_id: SessionIdArgument, data_dir: DataDirOption = None) -> None:
    """Print a session as a readable transcript (works while a daemon is using the session)."""
    from dsh.frontends import sessions_cli

    with sessions_cli.reported_errors():
        root = sessions_cli.resolve_data_dir(data_dir)
        stored = sessions_cli.read_session(root, sessions_cli.valid_id(session_id))
        typer.echo(sessions_cli.render_transcript(stored), nl=False)


@sessions_app.command("export")
def sessions_export(
    session_id: SessionIdArgument,
    data_dir: DataDirOption = None,
    format: Annotated[
        Literal["jsonl", "markdown"],
        typer.Option("--format", help="jsonl: the stored lines verbatim; markdown: a Markdown transcript."),
    ] = "jsonl",
) -> None:
    """Write a session to stdout, as its JSONL lines (header included) or as Markdown."""
    from dsh.frontends import sessions_cli

    with sessions_cli.reported_errors():
        root = sessions_cli.resolve_data_dir(data_dir)
        session_id = sessions_cli.valid_id(session_id)
        if format == "markdown":
            typer.echo(sessions_cli.render_markdown(sessions_cli.read_session(root, session_id)), nl=False)
            return
        content = sessions_cli.read_raw(root, session_id)
        lines = sessions_cli.complete_lines(content)
        if len(lines) < len(content):
            typer.echo(f"dsh: left out an incomplete final line ({len(content) - len(lines)} bytes)", err=True)
        typer.echo(lines, nl=False)


@sessions_app.command("rm")
def sessions_rm(session_id: SessionIdArgument, data_dir: DataDirOption = None) -> None:
    """Delete a stored session (refused while another dsh process is using it)."""
    import anyio

    from dsh.frontends import sessions_cli

    with sessions_cli.reported_errors():
        root = sessions_cli.resolve_data_dir(data_dir)
        session_id = sessions_cli.valid_id(session_id)
        anyio.run(sessions_cli.delete_session, root, session_id)
        typer.echo(f"Deleted session {session_id}.")


config_app = typer.Typer(
    help="The configuration file (--config, else DSH_CONFIG, else ~/.config/dsh/config.yaml): check it, show it.",
    no_args_is_help=True,
)
app.add_typer(config_app, name="config")
app.add_typer(mcp_app, name="mcp")

ConfigOption = Annotated[
    str | None,
    typer.Option(
        "--config",
        metavar="PATH",
        envvar="DSH_CONFIG",
        help="Configuration file (default: $XDG_CONFIG_HOME/dsh/config.yaml).",
    ),
]


def _load_config_or_exit(config: str | None) -> tuple[Path | None, DshConfig | None]:
    """The file :func:`dsh.config.find_config_file` picks and its contents; a file that does not load is reported
    on stderr and ends the command with status 1."""
    from dsh.config import ConfigError, find_config_file, load_config

    path = find_config_file(config)
    if path is None:
        return None, None
    try:
        return path, load_config(path)
    except ConfigError as error:
        typer.echo(f"dsh: {error.message}", err=True)
        raise typer.Exit(1) from None


@config_app.command("check")
def config_check(config: ConfigOption = None) -> None:
    """Validate the configuration file: "ok: PATH" and a summary, or every problem and status 1."""
    from dsh.config import default_config_path, summarize_config

    path, loaded = _load_config_or_exit(config)
    if path is None or loaded is None:
        typer.echo(f"no configuration file: {default_config_path()} does not exist (the defaults apply)")
        return
    typer.echo(f"ok: {path}")
    typer.echo(summarize_config(loaded))


@config_app.command("show")
def config_show(config: ConfigOption = None) -> None:
    """Print the effective configuration as YAML, secrets masked as *** (keys from the environment by name)."""
    import os

    from dsh.config import render_config

    path, loaded = _load_config_or_exit(config)
    typer.echo(render_config(loaded, source=path, env=os.environ), nl=False)


def main() -> None:
    """Run the typer application (the console script goes through :mod:`dsh._entry` first)."""
    app()
