"""``run_command``: a shell command in the working directory (or started in the background), a prepared tool
(schema, body and card)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from dsh.services.tools import Prepared, ToolCard, ToolExecution, define_prepared_tool
from dsh.tools._common import TITLE_WIDTH, Spec, card_path, changed, parse, paths_of, report
from dsh.tools._errors import ToolError
from dsh.tools._extra_tools import start_background
from dsh.tools._host import ToolHost
from dsh.tools._safeopen import PathChangedError
from dsh.tools._workspace import CommandResult

__all__ = [
    "COMMAND_OUTPUT_LIMIT",
    "COMMAND_TIMEOUT_DEFAULT",
    "COMMAND_TIMEOUT_MAX",
    "RunCommandArgs",
    "run_command_spec",
]

COMMAND_OUTPUT_LIMIT = 8 * 1024 * 1024
"""Bytes of a command's output captured (the first and the last half when it prints more): what the model sees
is then cut to the output budget (:mod:`dsh.tools._budget`) with the whole capture in a spill file."""
COMMAND_TIMEOUT_DEFAULT = 120.0
COMMAND_TIMEOUT_MAX = 600.0

DESCRIPTION = (
    "Run a shell command (bash) in the working directory and return its combined stdout and stderr and "
    "its exit code. It has no input (stdin is empty), so interactive programs get end-of-file. It is "
    "killed after `timeout` seconds, with any processes it started; for a server or a watcher set "
    "`background` instead. Long output keeps its beginning and its end, with the whole of it saved to a file "
    "the result names. Use it for builds, tests, git and programs, not to read, search or edit files (use "
    "the dedicated tools)."
)


class RunCommandArgs(BaseModel):
    command: str = Field(description="The shell command to run (bash -c).")
    timeout: float = Field(
        default=COMMAND_TIMEOUT_DEFAULT,
        gt=0,
        le=COMMAND_TIMEOUT_MAX,
        description=f"Seconds before the command is killed (default {COMMAND_TIMEOUT_DEFAULT:g}, "
        f"maximum {COMMAND_TIMEOUT_MAX:g}).",
    )
    cwd: str | None = Field(
        default=None, description="The directory to run in, relative to the working directory (default: it)."
    )
    background: bool = Field(
        default=False,
        description="Start it in the background and return at once with an id and its first output (for "
        "servers and watchers); read more with command_output, stop it with command_kill.",
    )


def _first_line(command: str) -> str:
    lines = command.strip().splitlines()
    line = lines[0] if lines else ""
    if len(lines) > 1:
        line += " …"
    if len(line) > TITLE_WIDTH:
        line = line[: TITLE_WIDTH - 1] + "…"
    return line


def timeout_note(timeout: float) -> str:
    """What a timed-out command's result ends with: what happened and how to go on."""
    again = (
        f"run it again with a larger timeout (up to {COMMAND_TIMEOUT_MAX:g}), or "
        if timeout < COMMAND_TIMEOUT_MAX
        else ""
    )
    return (
        f"[timed out after {timeout:g} s: the command and the processes it started were killed. To go on: {again}"
        "run it with background: true and follow its output with command_output (stop it with command_kill); "
        "or split the work into shorter commands]"
    )


def _command_text(result: CommandResult, timeout: float) -> str:
    parts: list[str] = []
    output = result.output.rstrip("\n")
    parts.append(output if output else "(no output)")
    if result.timed_out:
        parts.append(timeout_note(timeout))
    elif result.cancelled:
        parts.append("[cancelled]")
    elif result.exit_code is not None:
        parts.append(f"[exit code: {result.exit_code}]")
    elif result.signal is not None:
        parts.append(f"[killed by {result.signal}]")
    return "\n".join(parts)


async def run_command(host: ToolHost, args: RunCommandArgs, execution: ToolExecution) -> Prepared:
    cwd = host.cwd(execution)
    where = host.locate(execution, args.cwd) if args.cwd else None
    run_in = where.path if where is not None else cwd

    async def apply() -> str:
        if where is not None and args.cwd is not None:
            host.checked(execution, where, args.cwd)
        if args.background:
            real = where.real if where is not None else ""
            return await start_background(host.background, execution, args.command, run_in, real)
        try:
            result = await host.ws.run(
                execution,
                args.command,
                run_in,
                args.timeout,
                COMMAND_OUTPUT_LIMIT,
                real_cwd=where.real if where is not None else "",
            )
        except PathChangedError:
            raise changed(run_in) from None
        except FileNotFoundError as exc:
            raise ToolError(f"cannot run the command: {exc}", "BAD_CWD") from None
        failed = result.timed_out or result.cancelled or result.exit_code != 0
        display: dict[str, Any] = {
            "exit_code": result.exit_code,
            "signal": result.signal,
            "timed_out": result.timed_out,
            "cancelled": result.cancelled,
            "truncated": result.truncated,
        }
        if result.terminal_id is not None:
            display["terminal_id"] = result.terminal_id
        report(is_error=failed, display=display)
        return _command_text(result, args.timeout)

    outside = (where.path,) if where is not None and not where.inside else ()
    paths = (where.path,) if where is not None else ()
    return Prepared(apply, paths, outside, command=args.command, cwd=run_in)


def present_run(arguments: Any, cwd: str) -> ToolCard | None:
    args = parse(RunCommandArgs, arguments)
    if args is None:
        return None
    locations = ((card_path(args.cwd, cwd).path, None),) if args.cwd else ()
    return ToolCard(f"Run {_first_line(args.command)}", "execute", locations)


def run_command_spec(host: ToolHost) -> Spec:
    async def prepare(args: RunCommandArgs, execution: ToolExecution) -> Prepared:
        return await run_command(host, args, execution)

    tool = define_prepared_tool("run_command", DESCRIPTION, RunCommandArgs, prepare)
    return tool, "execute", present_run, paths_of(RunCommandArgs, "cwd")
