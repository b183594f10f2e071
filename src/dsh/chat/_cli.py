"""``dsh chat``'s command line, parsed with argparse: the chat is started by hand and often, and typer's
import and per-option set-up cost about 150 ms of the 0.5 s the first prompt line may take. ``dsh._entry``
sends ``dsh chat …`` here directly. ``--help`` is the typer application's (``dsh.cli.chat``, the same options,
drawn like every other command's help), and a usage error is one line in the typer commands' form; the typer
command forwards what it parsed to :func:`main`, so options are parsed here either way
(``tests/chat/test_parts.py`` checks both know the same options).
"""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

from dsh.chat._options import ChatOptions

__all__ = ["main", "parse"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """One line, as the typer commands say it: ``dsh chat: MESSAGE (see `dsh chat --help`)``, status 2."""
        sys.stderr.write(f"dsh chat: {message} (see `dsh chat --help`)\n")
        raise SystemExit(2)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="dsh chat",
        add_help=False,
        description=(
            "Chat with dsh (or any ACP agent) in the terminal. On a terminal: Enter sends, Alt+Enter adds a line, "
            "/ lists commands, @path attaches a file, Ctrl+C cancels a turn, Ctrl+D exits. Piped input runs one "
            "prompt per line and prints the replies."
        ),
    )
    parser.add_argument("--agent", metavar="COMMAND", help="talk to this ACP agent instead of `dsh acp`")
    parser.add_argument(
        "--connect",
        metavar="URL",
        help="talk to a `dsh serve` at this ws:// or wss:// URL (through `dsh bridge`; token from DSH_SERVE_TOKEN "
        "or the token file)",
    )
    parser.add_argument(
        "--trust-agent",
        action="store_true",
        help="with --agent: serve its file reads and writes outside the directory and its commands without asking",
    )
    parser.add_argument("--resume", action="store_true", help="pick a stored session and load it")
    parser.add_argument("--yes", action="store_true", help="without a terminal: allow every permission request once")
    parser.add_argument("--trace", metavar="FILE", help="append every ACP frame, both ways, to FILE")
    parser.add_argument("--model", metavar="PROVIDER:MODEL", help="dsh's model [env DSH_MODEL; default echo]")
    parser.add_argument("--data-dir", metavar="DIR", help="dsh's session storage [env DSH_DATA_DIR]")
    parser.add_argument("--config", metavar="PATH", help="dsh's configuration file [env DSH_CONFIG]")
    parser.add_argument("--cwd", metavar="DIR", help="the session's working directory (default: this one)")
    return parser


def parse(argv: list[str]) -> ChatOptions:
    """The options; a usage error is one line on stderr and exit status 2 (argparse's own)."""
    args = _parser().parse_args(argv)
    if args.connect and args.agent:
        _parser().error("--connect and --agent each name the agent; give one")
    agent = args.agent
    if args.connect:
        import shlex

        agent = shlex.join([sys.executable, "-m", "dsh", "bridge", args.connect])
    if (args.model or args.data_dir or args.config) and agent:
        _parser().error("--model, --data-dir and --config are dsh's settings; they do not apply to --agent")
    return ChatOptions(
        agent=agent,
        resume=args.resume,
        yes=args.yes,
        trace=args.trace,
        model=args.model,
        data_dir=args.data_dir,
        config=args.config,
        cwd=args.cwd,
        trust_agent=args.trust_agent,
    )


def main(argv: list[str] | None = None) -> int:
    from dsh.chat._run import run

    args = sys.argv[2:] if argv is None else argv
    try:
        options = parse(args)
    except SystemExit as stop:
        return int(stop.code or 0)
    return run(options)
