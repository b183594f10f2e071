"""The ``dsh`` command line (typer). Subcommands import what they need when they run, so ``dsh --help`` and the
daemon's start-up pay only for what they use.

Output discipline: a subcommand's own result goes to stdout; diagnostics go to stderr. The ``acp`` subcommand
owns stdout for protocol frames only.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from dsh.app import DEFAULT_MODEL
from dsh.frontends.setup_cli import setup as _setup
from dsh.jsonrpc import MAX_LINE
from dsh.mcp import mcp_app

if TYPE_CHECKING:
    from dsh.config import DshConfig
    from dsh.settings import Settings

app = typer.Typer(
    name="dsh",
    help="dsh: an ACP agent harness. Editors spawn `dsh acp`; `dsh exec` runs one task from a script or a terminal.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _show_version(value: bool) -> None:
    if value:
        from dsh import __version__

        sys.stdout.write(f"dsh {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", "-V", help="Print the version and exit.", callback=_show_version, is_eager=True),
    ] = False,
) -> None:
    """dsh: an ACP agent harness. Editors spawn `dsh acp`; `dsh exec` runs one task from a script or a terminal."""


ModelOption = Annotated[
    str | None,
    typer.Option(
        "--model",
        metavar="PROVIDER:MODEL",
        help=f"Model to use \\[env DSH_MODEL; config `model`; default {DEFAULT_MODEL}].",
        show_default=False,
    ),
]
SystemOption = Annotated[
    str | None,
    typer.Option(
        "--system", metavar="TEXT", help="Extra system prompt \\[env DSH_SYSTEM_PROMPT; config `system_prompt`]."
    ),
]
LogLevelOption = Annotated[
    str | None,
    typer.Option(
        "--log-level", metavar="LEVEL", help="debug, info, warning or error \\[env DSH_LOG_LEVEL; default warning]."
    ),
]
LogFileOption = Annotated[
    str | None,
    typer.Option("--log-file", metavar="FILE", help="Append logs to FILE instead of stderr \\[env DSH_LOG_FILE]."),
]
DataDirOption = Annotated[
    str | None,
    typer.Option(
        "--data-dir",
        metavar="DIR",
        help="Session storage \\[env DSH_DATA_DIR; config `data_dir`; default ~/.local/share/dsh/sessions].",
    ),
]
ConfigOption = Annotated[
    str | None,
    typer.Option(
        "--config",
        metavar="PATH",
        help="Configuration file \\[env DSH_CONFIG; default ~/.config/dsh/config.yaml if it exists].",
    ),
]


def settings_for(config: str | None = None, **flags: str | None) -> Settings:
    """The command's settings (:func:`dsh.settings.resolve_settings`); a bad flag, variable or file ends the
    command with one line on stderr and status 2 (usage) or 1 (runtime)."""
    from dsh.settings import exit_on_error, resolve_settings

    with exit_on_error():
        return resolve_settings(flags, config=config)


JsonOption = Annotated[
    bool, typer.Option("--json", help="One JSON object per line on stdout: each agent event, then the result.")
]
CwdOption = Annotated[str | None, typer.Option(metavar="DIR", help="Work in DIR (default: the current directory).")]
SessionOption = Annotated[
    str | None, typer.Option("--session", metavar="ID", help="Continue the stored session ID (an editor's too).")
]
EphemeralOption = Annotated[bool, typer.Option("--ephemeral", help="Store nothing (no session file).")]
WorktreeOption = Annotated[
    bool,
    typer.Option(
        "--worktree", help="Work in a new git worktree on branch dsh/<id> (the main tree is not touched; RFC 0040)."
    ),
]
MaxStepsOption = Annotated[
    int | None,
    typer.Option(
        "--max-steps", "--max-turns", metavar="N", help="Stop after N model calls (exit 1).", min=1, show_default=False
    ),
]
ModeOption = Annotated[
    str | None,
    typer.Option(
        "--mode",
        metavar="MODE",
        help="default, accept-edits, plan or bypass \\[config `permissions.mode`; else default].",
        show_default=False,
    ),
]
AllowReadsOption = Annotated[
    bool, typer.Option("--allow-reads", help="Let reads and searches reach outside the working directory.")
]
AllowEditsOption = Annotated[bool, typer.Option("--allow-edits", help="Let file edits run without asking.")]
AllowAllOption = Annotated[
    bool, typer.Option("--allow-all", help="Let everything run without asking (deny rules still hold).")
]
MaxCostOption = Annotated[
    float | None,
    typer.Option(
        "--max-cost",
        metavar="USD",
        help="Stop the turn at a step boundary once it cost USD dollars, sub-agents included (exit 3).",
        min=0.000001,
        show_default=False,
    ),
]
MaxTokensOption = Annotated[
    int | None,
    typer.Option(
        "--max-tokens",
        metavar="N",
        help="Stop the turn at a step boundary once its model calls used N tokens, input and output (exit 3).",
        min=1,
        show_default=False,
    ),
]
WaitBackgroundOption = Annotated[
    bool,
    typer.Option(
        "--wait-background",
        help="Before exiting, wait for the background commands the task started to end; each ending is told to "
        "the model in a turn of its own (the answer is the last turn's).",
    ),
]
TimeoutOption = Annotated[
    float | None,
    typer.Option(metavar="SECONDS", help="Cancel the run after SECONDS (exit 1).", min=0.001, show_default=False),
]


def _run_options(
    json_output: JsonOption = False,
    cwd: CwdOption = None,
    session: SessionOption = None,
    ephemeral: EphemeralOption = False,
    worktree: WorktreeOption = False,
    max_steps: MaxStepsOption = None,
    max_cost: MaxCostOption = None,
    max_tokens: MaxTokensOption = None,
    timeout: TimeoutOption = None,
    wait_background: WaitBackgroundOption = False,
    mode: ModeOption = None,
    allow_reads: AllowReadsOption = False,
    allow_edits: AllowEditsOption = False,
    allow_all: AllowAllOption = False,
    model: ModelOption = None,
    system: SystemOption = None,
    data_dir: DataDirOption = None,
    log_level: LogLevelOption = None,
    log_file: LogFileOption = None,
    config: ConfigOption = None,
) -> None:
    """The options ``dsh exec`` and ``dsh prompt`` share, declared once: this signature (see
    :func:`_with_run_options`)."""


def _with_run_options(command: Callable[..., None]) -> Callable[..., None]:
    """*command*'s own parameters (its argument) followed by :func:`_run_options`' options, as typer reads them
    (the signature and the annotations); typer then calls *command* with every option as a keyword."""
    import inspect
    import typing

    hints = {
        **typing.get_type_hints(command, include_extras=True),
        **typing.get_type_hints(_run_options, include_extras=True),
    }
    own = [p for p in inspect.signature(command).parameters.values() if p.kind is not p.VAR_KEYWORD]
    shared = list(inspect.signature(_run_options).parameters.values())
    command.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [p.replace(annotation=hints[p.name]) for p in (*own, *shared)]
    )
    command.__annotations__ = {p.name: hints[p.name] for p in (*own, *shared)}
    return command


@app.command("exec")
@_with_run_options
def exec_command(
    task: Annotated[
        str | None,
        typer.Argument(
            metavar="TASK", help="The task; `-` (or nothing, with stdin not a terminal) reads it from stdin."
        ),
    ] = None,
    connect: Annotated[
        str | None,
        typer.Option(
            "--connect",
            metavar="URL",
            help="Run the task on a `dsh serve` at this ws:// URL (token from DSH_SERVE_TOKEN or the token file; "
            "--cwd is a directory on the server).",
        ),
    ] = None,
    **options: Any,
) -> None:
    """Run one task through the agent loop: the answer on stdout (or --json events), exit 0 done, 1 failed,
    2 usage, 3 a spend budget stopped it (--max-cost, --max-tokens, config `budget`), 130 interrupted."""
    if task is None or task == "-":
        if task is None and sys.stdin.isatty():
            typer.echo("dsh exec: give the task as an argument, or `-` to read it from stdin", err=True)
            raise typer.Exit(2)
        task = sys.stdin.read()
    if connect is not None:
        _exec_remote(connect, task, options)
    _exec(task, options)


def _turn_options(options: dict[str, Any]) -> dict[str, Any]:
    """The options a local run and a ``--connect`` run take alike: output, session, mode, time, permissions."""
    names = ("session", "mode", "timeout", "allow_reads", "allow_edits", "allow_all")
    return {"json": options["json_output"], **{name: options[name] for name in names}}


def _exec_remote(url: str, task: str, options: dict[str, Any]) -> None:
    """``dsh exec --connect``: the task on a remote ``dsh serve`` (the server's settings apply there)."""
    from dsh.frontends.serve import RemoteExec, run_remote_exec

    local = [
        name
        for name in ("model", "system", "data_dir", "config", "max_steps", "max_cost", "max_tokens")
        if options[name] is not None
    ]
    local += [name for name in ("ephemeral", "wait_background", "worktree") if options[name]]
    if local:
        flags = ", ".join("--" + name.replace("_", "-") for name in local)
        typer.echo(f"dsh exec: {flags} are the server's settings; they do not apply with --connect", err=True)
        raise typer.Exit(2)
    if not task.strip():
        typer.echo("dsh exec: the task is empty", err=True)
        raise typer.Exit(2)
    run = RemoteExec(url=url, task=task, cwd=options["cwd"] or os.getcwd(), **_turn_options(options))
    raise typer.Exit(run_remote_exec(run))


@app.command()
@_with_run_options
def prompt(
    text: Annotated[str, typer.Argument(metavar="TEXT", help="The prompt to send.", show_default=False)],
    **options: Any,
) -> None:
    """The same as `dsh exec TEXT` (kept for the scripts that use it)."""
    _exec(text, options)


def _exec(task: str, options: dict[str, Any]) -> None:
    """Run *task* with the :func:`_run_options` *options* (by name)."""
    import anyio

    from dsh.frontends.headless import ExecOptions, run_exec

    session, ephemeral = options["session"], options["ephemeral"]
    if session is not None and ephemeral:
        typer.echo("dsh exec: --session continues a stored session; it cannot be --ephemeral", err=True)
        raise typer.Exit(2)
    if options["worktree"] and (session is not None or ephemeral):
        typer.echo(
            "dsh exec: --worktree starts a stored session in a new worktree: not with --session or --ephemeral",
            err=True,
        )
        raise typer.Exit(2)
    if not task.strip():
        typer.echo("dsh exec: the task is empty", err=True)
        raise typer.Exit(2)
    workdir = os.path.abspath(options["cwd"] or os.getcwd())
    if not os.path.isdir(workdir):
        typer.echo(f"dsh exec: --cwd: {workdir} is not a directory", err=True)
        raise typer.Exit(2)
    settings = settings_for(
        options["config"],
        model=options["model"],
        system_prompt=options["system"],
        data_dir=options["data_dir"],
        log_level=options["log_level"],
        log_file=options["log_file"],
    )
    if not ephemeral:
        from dsh.settings import create_data_dir

        create_data_dir(settings, "dsh exec")
    run = ExecOptions(
        task=task,
        cwd=workdir,
        ephemeral=ephemeral,
        worktree=options["worktree"],
        max_steps=options["max_steps"],
        max_cost=options["max_cost"],
        max_tokens=options["max_tokens"],
        wait_background=options["wait_background"],
        **_turn_options(options),
    )
    raise typer.Exit(anyio.run(run_exec, run, settings))


@app.command()
def acp(
    model: ModelOption = None,
    system: SystemOption = None,
    log_level: LogLevelOption = None,
    log_file: LogFileOption = None,
    data_dir: DataDirOption = None,
    config: ConfigOption = None,
    agent_events: Annotated[
        bool,
        typer.Option(
            "--agent-events",
            help="Send every client the _dsh/agent/* event stream (clients can also ask for it) \\[env DSH_AGENT_EVENTS].",
        ),
    ] = False,
    record: Annotated[
        str | None,
        typer.Option(
            "--record",
            metavar="FILE",
            help="Record every frame and model response to FILE (or a new file in a directory), secrets redacted; "
            r"replay it with `dsh replay FILE` \[env DSH_RECORD].",
        ),
    ] = None,
    replay_models: Annotated[str | None, typer.Option("--replay-models", hidden=True)] = None,
) -> None:
    """Run the ACP daemon on stdin/stdout (what editors spawn)."""
    from dsh.frontends.acp import DaemonOptions, run
    from dsh.settings import exit_on_error

    with exit_on_error():  # the daemon's own resolution: an unusable data directory does not stop it (RFC 0009)
        options = DaemonOptions.resolve(
            model=model,
            system_prompt=system,
            log_level=log_level,
            log_file=log_file,
            data_dir=data_dir,
            config=config,
            agent_events=agent_events,
            record=record,
        )
    from dsh.frontends.acp import note_if_terminal

    note_if_terminal()
    if replay_models is not None:
        import json
        from dataclasses import replace

        options = replace(options, replay_models=json.loads(Path(replay_models).read_text(encoding="utf-8")))
    raise typer.Exit(run(options))


@app.command()
def chat(
    agent: Annotated[
        str | None, typer.Option("--agent", metavar="COMMAND", help="Talk to this ACP agent instead of `dsh acp`.")
    ] = None,
    connect: Annotated[
        str | None,
        typer.Option(
            "--connect",
            metavar="URL",
            help="Talk to a `dsh serve` at this ws:// URL (through `dsh bridge`; token from DSH_SERVE_TOKEN or the "
            "token file).",
        ),
    ] = None,
    resume: Annotated[bool, typer.Option("--resume", help="Pick a stored session and load it.")] = False,
    yes: Annotated[
        bool, typer.Option("--yes", help="Without a terminal: allow every permission request once.")
    ] = False,
    trace: Annotated[
        str | None, typer.Option("--trace", metavar="FILE", help="Append every ACP frame, both ways, to FILE.")
    ] = None,
    trust_agent: Annotated[
        bool,
        typer.Option(
            "--trust-agent",
            help="With --agent: serve its file reads and writes outside this directory and its commands without "
            "asking.",
        ),
    ] = False,
    model: ModelOption = None,
    data_dir: DataDirOption = None,
    config: ConfigOption = None,
    cwd: Annotated[
        str | None, typer.Option(metavar="DIR", help="The session's working directory (default: this one).")
    ] = None,
) -> None:
    """Chat with dsh (or any ACP agent) in the terminal: Enter sends, Esc stops a turn, Ctrl+D exits (the keys are in the README); piped input runs one prompt per line and prints the replies."""
    from dsh.chat import main as chat_main

    # `dsh chat` normally never reaches typer (dsh._entry sends it to the chat's own quick parser, which shows
    # this command's help): this forwards what typer parsed to that same parser
    argv = [flag for flag, on in (("--resume", resume), ("--yes", yes), ("--trust-agent", trust_agent)) if on]
    for flag, value in (
        ("--agent", agent),
        ("--connect", connect),
        ("--trace", trace),
        ("--model", model),
        ("--data-dir", data_dir),
        ("--config", config),
        ("--cwd", cwd),
    ):
        if value is not None:
            argv += [flag, value]
    raise typer.Exit(chat_main(argv))


@app.command()
def serve(
    listen: Annotated[
        str, typer.Option("--listen", metavar="HOST:PORT", help="Where to listen (loopback unless told otherwise).")
    ] = "127.0.0.1:8765",
    token_file: Annotated[
        str | None,
        typer.Option(
            "--token-file",
            metavar="FILE",
            help=r"The bearer token's file (made with mode 0600 at first start) \[env DSH_SERVE_TOKEN: the token].",
        ),
    ] = None,
    allow_origin: Annotated[
        list[str] | None,
        typer.Option("--allow-origin", metavar="ORIGIN", help="An Origin a browser client may connect from."),
    ] = None,
    tls_cert: Annotated[
        str | None, typer.Option("--tls-cert", metavar="FILE", help="Serve wss:// with this certificate.")
    ] = None,
    tls_key: Annotated[
        str | None, typer.Option("--tls-key", metavar="FILE", help="The certificate's private key.")
    ] = None,
    max_frame: Annotated[
        int, typer.Option("--max-frame", metavar="BYTES", help="Largest message accepted.")
    ] = MAX_LINE,
    max_connections: Annotated[int, typer.Option("--max-connections", help="Connections open at once.")] = 64,
    idle_timeout: Annotated[
        float, typer.Option("--idle-timeout", metavar="SECONDS", help="Close a connection silent this long.")
    ] = 3600.0,
    delegate: Annotated[
        bool,
        typer.Option(
            "--delegate", help="Let clients' fs/* and terminal/* capabilities through (off: files are this machine's)."
        ),
    ] = False,
    model: ModelOption = None,
    system: SystemOption = None,
    log_level: LogLevelOption = None,
    log_file: LogFileOption = None,
    data_dir: DataDirOption = None,
    config: ConfigOption = None,
) -> None:
    """Serve ACP over WebSocket at ws://HOST:PORT/acp: each connection is a client as an editor on stdio is (RFC 0038)."""
    from dsh.frontends.acp import DaemonOptions
    from dsh.frontends.serve import ServeOptions, run_serve
    from dsh.settings import exit_on_error, fail

    host, _, port = listen.rpartition(":")
    if not host or not port.isdigit():
        fail(f"--listen {listen}: expected HOST:PORT", 2)
    with exit_on_error():
        daemon = DaemonOptions.resolve(
            model=model, system_prompt=system, log_level=log_level, log_file=log_file, data_dir=data_dir, config=config
        )
    options = ServeOptions(
        host=host.strip("[]"),
        port=int(port),
        allowed_origins=tuple(allow_origin or ()),
        max_frame=max_frame,
        max_connections=max_connections,
        idle_timeout=idle_timeout,
        delegate=delegate,
        tls_cert=tls_cert,
        tls_key=tls_key,
    )
    raise typer.Exit(run_serve(options, daemon, token_file))


@app.command()
def bridge(
    url: Annotated[
        str, typer.Argument(metavar="URL", help="The server's ws:// or wss:// address, e.g. ws://127.0.0.1:8765/acp.")
    ],
    token_file: Annotated[
        str | None,
        typer.Option(
            "--token-file", metavar="FILE", help=r"The bearer token's file \[env DSH_SERVE_TOKEN: the token]."
        ),
    ] = None,
) -> None:
    """Connect stdin/stdout to a `dsh serve`: any stdio ACP client (an editor) reaches a remote dsh."""
    from dsh.frontends.serve import run_bridge

    raise typer.Exit(run_bridge(url, token_file))


@app.command()
def version() -> None:
    """Print the version."""
    from dsh import __version__

    sys.stdout.write(f"dsh {__version__}\n")


app.command("setup")(_setup)


@app.command()
def replay(
    file: Annotated[str, typer.Argument(metavar="FILE", help="A recording made with `dsh acp --record`.")],
    update: Annotated[bool, typer.Option("--update", help="Rewrite FILE with what the daemon sends now.")] = False,
    cwd: Annotated[
        str | None, typer.Option(metavar="DIR", help="Run where the recording ran in DIR instead (paths mapped).")
    ] = None,
    timeout: Annotated[float, typer.Option(metavar="SECONDS", help="How long to wait for each recorded frame.")] = 10.0,
    config: ConfigOption = None,
) -> None:
    """Re-drive a fresh daemon from a recording and compare what it sends: exit 0 when equal, else 1 and a diff."""
    from dsh.recording import run_replay

    raise typer.Exit(run_replay(file, cwd=cwd, frame_timeout=timeout, update=update, config=config))


sessions_app = typer.Typer(
    help="Stored sessions: list, show, export, delete (rm), fork and prune them. Reading never locks or changes a "
    "session file.",
    no_args_is_help=True,
)
app.add_typer(sessions_app, name="sessions")

SessionIdArgument = Annotated[str, typer.Argument(metavar="ID", help="The session id.", show_default=False)]


@sessions_app.command("list")
def sessions_list(
    data_dir: DataDirOption = None,
    config: ConfigOption = None,
    cwd: Annotated[str | None, typer.Option(metavar="DIR", help="Only sessions started in DIR.")] = None,
    all_: Annotated[
        bool,
        typer.Option(
            "--all", help="Also sessions created but never used, and sub-agents' sessions (hidden by default)."
        ),
    ] = False,
) -> None:
    """One line per stored session, newest first: id, last update, working directory, title ([branch] first for a
    session in a git worktree); stderr names the store read."""
    import anyio

    from dsh.frontends import sessions_cli

    with sessions_cli.reported_errors():
        settings = settings_for(config, data_dir=data_dir)
        root = Path(settings.data_dir)
        if not root.exists():  # a typo in --data-dir is not an empty store
            typer.echo(f"No sessions: {root} ({settings.origin('data_dir')}) does not exist.")
            return
        typer.echo(f"dsh: sessions in {root} ({settings.origin('data_dir')})", err=True)  # which store this is
        every = anyio.run(partial(sessions_cli.list_sessions, root, cwd, include_empty=True))
        infos = every if all_ else [info for info in every if not info.empty and info.parent_call is None]
        empty = 0 if all_ else sum(1 for info in every if info.empty)
        hidden = sessions_cli.hidden_note(empty, len(every) - len(infos) - empty)
        if not infos:
            where = f"for {cwd} " if cwd is not None else ""
            typer.echo(f"No sessions {where}in {root}{f' ({hidden})' if hidden else ''}.")
            return
        from dsh.worktrees import WorktreeStore

        typer.echo(sessions_cli.render_list(infos, WorktreeStore(root).all()), nl=False)
        if hidden:
            typer.echo(f"({hidden})")


@sessions_app.command("show")
def sessions_show(session_id: SessionIdArgument, data_dir: DataDirOption = None, config: ConfigOption = None) -> None:
    """Print a session as a readable transcript (works while a daemon is using the session), its git worktree and
    how to merge it, then its sub-agents' sessions."""
    from dsh.frontends import sessions_cli

    with sessions_cli.reported_errors():
        root = Path(settings_for(config, data_dir=data_dir).data_dir)
        stored = sessions_cli.read_session(root, sessions_cli.valid_id(session_id))
        typer.echo(sessions_cli.render_transcript(stored), nl=False)
        worktree = sessions_cli.worktree_text(root, stored.header.id)
        if worktree is not None:  # where the session's work is and how to merge it (RFC 0040)
            typer.echo("\n" + worktree)
        import anyio

        every = anyio.run(partial(sessions_cli.list_sessions, root, None, include_empty=True))
        typer.echo(sessions_cli.render_children(every, stored.header.id), nl=False)


@sessions_app.command("export")
def sessions_export(
    session_id: SessionIdArgument,
    data_dir: DataDirOption = None,
    config: ConfigOption = None,
    format: Annotated[
        Literal["jsonl", "markdown"],
        typer.Option("--format", help="jsonl: the stored lines verbatim; markdown: a Markdown transcript."),
    ] = "jsonl",
) -> None:
    """Write a session to stdout, as its JSONL lines (header included) or as Markdown."""
    from dsh._text import plural
    from dsh.frontends import sessions_cli

    with sessions_cli.reported_errors():
        root = Path(settings_for(config, data_dir=data_dir).data_dir)
        session_id = sessions_cli.valid_id(session_id)
        if format == "markdown":
            typer.echo(sessions_cli.render_markdown(sessions_cli.read_session(root, session_id)), nl=False)
            return
        content = sessions_cli.read_raw(root, session_id)
        lines = sessions_cli.complete_lines(content)
        if len(lines) < len(content):
            typer.echo(
                f"dsh: left out an incomplete final line ({plural(len(content) - len(lines), 'byte')})", err=True
            )
        typer.echo(lines, nl=False)


@sessions_app.command("rm")
def sessions_rm(
    session_id: SessionIdArgument,
    data_dir: DataDirOption = None,
    config: ConfigOption = None,
    force: Annotated[
        bool, typer.Option("--force", help="Also discard uncommitted changes in the session's git worktree.")
    ] = False,
) -> None:
    """Delete a stored session (refused while another dsh process is using it) and its git worktree (refused with
    uncommitted changes unless --force; the branch is kept when it has commits of its own)."""
    import anyio

    from dsh.frontends import sessions_cli

    with sessions_cli.reported_errors():
        root = Path(settings_for(config, data_dir=data_dir).data_dir)
        session_id = sessions_cli.valid_id(session_id)
        worktree = anyio.run(partial(sessions_cli.delete_session, root, session_id, force=force))
        typer.echo(f"Deleted session {session_id}.")
        if worktree is not None:
            typer.echo(worktree)


@sessions_app.command("fork")
def sessions_fork(
    session_id: SessionIdArgument,
    at: Annotated[
        int | None, typer.Option("--at", metavar="N", help="Keep turns 1 to N (as /rewind lists them); default: all.")
    ] = None,
    data_dir: DataDirOption = None,
    config: ConfigOption = None,
) -> None:
    """Copy a session's history (up to turn N) into a new session of its own; print the new id. Files are not
    touched."""
    from dsh.frontends import sessions_cli
    from dsh.frontends.sessions_fork import fork_session

    with sessions_cli.reported_errors():
        root = Path(settings_for(config, data_dir=data_dir).data_dir)
        try:
            new_id = fork_session(root, sessions_cli.valid_id(session_id), at)
        except ValueError as error:
            typer.echo(f"dsh: {error}", err=True)
            raise typer.Exit(2) from None
        typer.echo(new_id)


@sessions_app.command("prune")
def sessions_prune(
    older_than: Annotated[
        str, typer.Option("--older-than", metavar="AGE", help="Remove sessions not updated for AGE (30d, 12h, 2w).")
    ] = "30d",
    data_dir: DataDirOption = None,
    config: ConfigOption = None,
) -> None:
    """Remove sessions older than AGE and sessions never prompted, with the images and checkpoints only they hold
    (a session another dsh process has open is kept)."""
    import anyio

    from dsh.frontends import sessions_cli
    from dsh.frontends.sessions_prune import parse_age, prune_sessions

    try:
        bound = parse_age(older_than)
    except ValueError as error:
        typer.echo(f"dsh: --older-than: {error}", err=True)
        raise typer.Exit(2) from None
    with sessions_cli.reported_errors():
        root = Path(settings_for(config, data_dir=data_dir).data_dir)
        report = anyio.run(prune_sessions, root, bound)
        typer.echo(
            f"Removed {len(report.removed_old)} session(s) older than {older_than} and "
            f"{len(report.removed_empty)} never prompted"
            + (f"; kept {len(report.kept_in_use)} in use by another dsh process" if report.kept_in_use else "")
            + (
                f"; kept {len(report.kept_worktree)} whose git worktree has uncommitted changes (dsh sessions rm --force)"
                if report.kept_worktree
                else ""
            )
            + "."
        )


config_app = typer.Typer(
    help="The configuration file (--config, else DSH_CONFIG, else ~/.config/dsh/config.yaml): check it, show it "
    "(check, show).",
    no_args_is_help=True,
)
app.add_typer(config_app, name="config")
app.add_typer(mcp_app, name="mcp")


def _load_config_or_exit(config: str | None) -> tuple[Path | None, DshConfig | None]:
    """The file :func:`dsh.config.find_config_file` picks and its contents; a file that does not load is reported
    on stderr and ends the command with status 1."""
    from dsh.config import ConfigError, find_config_file, load_config

    try:
        path = find_config_file(config or os.environ.get("DSH_CONFIG") or None)
        if path is None:
            return None, None
        return path, load_config(path)
    except ConfigError as error:
        typer.echo(f"dsh: {error.message}", err=True)
        raise typer.Exit(1) from None


@config_app.command("check")
def config_check(config: ConfigOption = None) -> None:
    """Validate the configuration file: "ok: PATH" and a summary, or every problem and status 1."""
    from dsh.config import default_config_path, summarize_config

    path, loaded = _load_config_or_exit(config)
    settings = settings_for(config)  # the DSH_* variables too
    from dsh.extra_plugins import import_plugins
    from dsh.settings import exit_on_error

    with exit_on_error():  # and that every DSH_PLUGINS entry names a plugin (one line, status 2)
        import_plugins(settings.plugins)
    if path is None or loaded is None:
        typer.echo(f"no configuration file: {default_config_path()} does not exist (the defaults apply)")
        return
    typer.echo(f"ok: {path}")
    typer.echo(summarize_config(loaded))
    for line in loaded.permissions.changed_rules():  # RFC 0041: a rule that means something else now
        typer.echo(f"note: permission rule {line}")


@config_app.command("show")
def config_show(
    config: ConfigOption = None,
    system_prompt: Annotated[
        bool, typer.Option("--system-prompt", help="Print the system prompt a new session would send instead.")
    ] = False,
    cwd: Annotated[str | None, typer.Option(metavar="DIR", help="With --system-prompt: a session in DIR.")] = None,
    client_prompt: Annotated[
        str | None,
        typer.Option(metavar="TEXT", help="With --system-prompt: an editor's systemPrompt for the session."),
    ] = None,
    client_prompt_mode: Annotated[
        str, typer.Option(metavar="MODE", help="With --client-prompt: append (default) or override.")
    ] = "append",
    skills: Annotated[
        bool, typer.Option("--skills", help="List the skills a session in --cwd (default: here) offers instead.")
    ] = False,
    hooks: Annotated[
        bool, typer.Option("--hooks", help="List the hooks a session in --cwd (default: here) has instead.")
    ] = False,
) -> None:
    """Print the effective configuration as YAML: every section and key of the configuration model with its value, where it came from (default, file, environment) and, for keys the file sets, their defaults; secrets masked as *** (keys from the environment by name)."""
    from dsh.config import render_config

    path, loaded = _load_config_or_exit(config)
    settings = settings_for(config)
    if skills:
        from dsh.skills import SkillsConfig, discover_skills

        chosen = loaded.skills if loaded is not None else SkillsConfig()
        found = discover_skills(os.path.abspath(cwd or os.getcwd()), claude=chosen.claude) if chosen.enabled else []
        for skill in found:
            typer.echo(f"{skill.name}\t{skill.origin}\t{skill.path}\t{skill.description}")
        if not found:
            typer.echo("no skills", err=True)
        return
    if hooks:
        from dsh.hooks import HooksConfig, list_hooks

        where = str(path) if path is not None else "user"
        lines = list_hooks(
            loaded.hooks if loaded is not None else HooksConfig(), where, os.path.abspath(cwd or os.getcwd())
        )
        for line in lines:
            typer.echo(line)
        if not lines:
            typer.echo("no hooks", err=True)
        return
    if system_prompt:
        from dsh.frontends.acp import show_system_prompt

        raise typer.Exit(show_system_prompt(settings, cwd, client_prompt, client_prompt_mode))
    origin = "--config" if config else "DSH_CONFIG" if os.environ.get("DSH_CONFIG") else None
    typer.echo(render_config(loaded, source=path, env=os.environ, config_origin=origin), nl=False)


def main(argv: list[str] | None = None) -> int:
    """Run the command line and return its exit status. Every usage error (an unknown option, a missing
    argument, a bad choice) is one line on stderr and status 2; a command's own errors are reported by the
    command (:func:`settings_for`, ``reported_errors``); nothing ends in a traceback."""
    from typer._click.exceptions import NoArgsIsHelpError, UsageError
    from typer.exceptions import Abort

    command = typer.main.get_command(app)
    _tidy_help(command)
    try:
        result = command.main(args=argv, prog_name="dsh", standalone_mode=False)
    except NoArgsIsHelpError as error:
        sys.stdout.write(error.ctx.get_help() + "\n")
        return 0
    except UsageError as error:
        where = error.ctx.command_path if error.ctx is not None else "dsh"
        message = " ".join(error.format_message().split())
        sys.stderr.write(f"{where}: {message} (see `{where} --help`)\n")
        return 2
    except Abort:
        sys.stderr.write("dsh: aborted\n")
        return 1
    return result if isinstance(result, int) else 0


def _tidy_help(command: Any) -> None:
    """Help without typer's type labels: a flag shows no ``<bool>``, an option or argument its metavar, and a
    required argument is ``ID`` in the usage line, not ``{ID}``. Applies to every command, including those other
    modules register."""
    from typer.core import TyperArgument

    original = command.get_params

    def get_params(ctx: Any) -> list[Any]:
        params = original(ctx)
        for param in params:
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""
            if isinstance(param, TyperArgument):
                name = param.metavar or param.name.upper()
                param.metavar = name
                setattr(param, "display_type_rich", lambda ctx: None)  # noqa: B010 - an instance override
                setattr(param, "get_usage_pieces", lambda ctx, name=name: [name])  # noqa: B010 - an instance override
        return list(params)

    setattr(command, "get_params", get_params)  # noqa: B010 - an instance override
    if isinstance(command.help, str):  # docstrings are wrapped at 120 columns; the terminal wraps help itself
        command.help = _unwrap(command.help)
    for sub in getattr(command, "commands", {}).values():
        _tidy_help(sub)


def _unwrap(text: str) -> str:
    """Paragraphs on one line each: a single newline (a docstring's hard wrap) is a space, a blank line stays."""
    import re

    return re.sub(r"[ \t]*(?<!\n)\n(?!\n)[ \t]*", " ", text.strip())
