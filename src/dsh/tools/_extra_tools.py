"""The tools beyond files and search: background commands (``run_command`` with ``background``,
``command_output``, ``command_kill``) and ``fetch_url``.

Bodies and cards follow the built-in tools' rules (:mod:`dsh.tools._builtin`) (arguments validated by pydantic, failures as
:class:`ToolError` with a code, cards drawn from the arguments alone).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, ValidationError

from dsh.services.tools import ToolCard, ToolDefinition, ToolExecution, define_tool
from dsh.tools._common import report, session_of
from dsh.tools._errors import ToolError
from dsh.tools._fetch import fetch_domain, fetch_markdown

if TYPE_CHECKING:
    from dsh.tools._background import BackgroundCommand, BackgroundCommands
    from dsh.tools._paths import ResolvedPath

__all__ = ["CommandIdArgs", "CommandOutputArgs", "CommandWaitArgs", "FetchUrlArgs", "extra_tools", "start_background"]

Spec = tuple[ToolDefinition, str, Callable[[Any, str], ToolCard | None], Callable[[Any, str], "list[ResolvedPath]"]]


class CommandIdArgs(BaseModel):
    id: str = Field(description="The id run_command gave the background command, e.g. bg1.")


class CommandOutputArgs(CommandIdArgs):
    wait: float = Field(
        default=0,
        ge=0,
        le=60,
        description="Seconds to wait for new output (or for the command to end) when there is none yet.",
    )


class CommandWaitArgs(CommandIdArgs):
    timeout: float = Field(
        default=60,
        ge=0,
        le=600,
        description="Seconds to wait at most; the result says whether the command ended or the wait timed out.",
    )


class FetchUrlArgs(BaseModel):
    url: str = Field(description="The http(s) URL to fetch, one the user gave or the project names.")


COMMAND_WAIT_DESCRIPTION = (
    "Wait until a background command (run_command with background) ends, at most `timeout` seconds, then return "
    "its exit and what it printed since the last read; the result says whether it ended or the wait timed out. "
    "Use it when you need the result before going on; otherwise carry on: a command that ends while you work is "
    "reported to you at your next step."
)


def _require(background: BackgroundCommands | None) -> BackgroundCommands:
    if background is None:
        raise ToolError("background commands are not available here", "UNAVAILABLE")
    return background


def _state(entry: BackgroundCommand) -> str:
    return "still running" if entry.running else entry.exit_text()


async def start_background(
    background: BackgroundCommands | None, execution: ToolExecution, command: str, cwd: str, real_cwd: str
) -> str:
    """``run_command`` with ``background: true``: start, wait briefly for the first output, report."""
    from dsh.tools._workspace import open_cwd

    registry = _require(background)
    cwd_fd = open_cwd(real_cwd) if real_cwd else None
    try:
        entry = await registry.start(session_of(execution), command, cwd, cwd_fd=cwd_fd)
    except FileNotFoundError as exc:
        raise ToolError(f"cannot run the command: {exc}", "BAD_CWD") from None
    finally:
        if cwd_fd is not None:
            os.close(cwd_fd)
    await registry.first_output(entry)
    snapshot = registry.read(entry)
    lines = [
        f"Started in the background as {entry.id} (pid {entry.pid}); it is {_state(entry)}. Read what it prints "
        f"with command_output(id={entry.id!r}), stop it with command_kill(id={entry.id!r}).",
    ]
    first = snapshot.text.rstrip("\n")
    lines.append(f"First output:\n{first}" if first else "(no output yet)")
    report(
        is_error=not entry.running and snapshot.exit_code not in (0, None),
        display={"background": entry.id, "pid": entry.pid, "running": entry.running, "exit_code": snapshot.exit_code},
    )
    return "\n".join(lines)


def _background_tools(background: BackgroundCommands | None) -> list[Spec]:
    async def command_output(args: CommandOutputArgs, execution: ToolExecution) -> str:
        import anyio

        registry = _require(background)
        entry = registry.get(session_of(execution), args.id)
        if entry is None:
            raise ToolError(f"no background command {args.id!r} in this session", "NOT_FOUND")
        if args.wait:
            await registry.wait_for_output(entry, args.wait)
        if not entry.running:  # a command that just exited may still have output in the pipe
            with anyio.move_on_after(0.5):
                await entry.done_reading.wait()
        snapshot = registry.read(entry)
        head = f"{entry.id} is {_state(entry)}."
        if snapshot.missed:
            head += f" ({snapshot.missed:,} bytes of older output were dropped before they were read.)"
        body = snapshot.text.rstrip("\n")
        return f"{head}\n{body}" if body else f"{head}\n(no new output)"

    async def command_wait(args: CommandWaitArgs, execution: ToolExecution) -> str:
        """Wait for the command's end, at most ``timeout`` seconds; a cancel of the turn (the call's signal)
        ends the wait at once with :class:`AbortedError`, like any aborted tool call."""
        import anyio

        registry = _require(background)
        entry = registry.get(session_of(execution), args.id)
        if entry is None:
            raise ToolError(f"no background command {args.id!r} in this session", "NOT_FOUND")
        signal = execution.signal
        ended = False
        with anyio.CancelScope() as scope:
            remove = signal.add_callback(lambda _reason: scope.cancel()) if signal is not None else None
            try:
                ended = await registry.wait_exit(entry, args.timeout)
            finally:
                if remove is not None:
                    remove()
        if signal is not None:
            signal.raise_if_aborted()
        snapshot = registry.read(entry)
        body = snapshot.text.rstrip("\n")
        if ended:
            head = f"{entry.id} ended: it {entry.exit_text()}."
        else:
            head = f"{entry.id} is still running after {args.timeout:g} s (the wait timed out)."
        if snapshot.missed:
            head += f" ({snapshot.missed:,} bytes of older output were dropped before they were read.)"
        report(
            is_error=ended and snapshot.exit_code not in (0, None),
            display={"background": entry.id, "ended": ended, "exit_code": snapshot.exit_code},
        )
        return f"{head}\nOutput since the last read:\n{body}" if body else f"{head}\n(no new output)"

    async def command_kill(args: CommandIdArgs, execution: ToolExecution) -> str:
        registry = _require(background)
        entry = registry.get(session_of(execution), args.id)
        if entry is None:
            raise ToolError(f"no background command {args.id!r} in this session", "NOT_FOUND")
        if not entry.running:
            return f"{entry.id} had already stopped ({entry.exit_text()})."
        await registry.kill(entry)
        return f"Stopped {entry.id} ({entry.exit_text()})."

    def present(verb: str) -> Callable[[Any, str], ToolCard | None]:
        def card(arguments: Any, cwd: str) -> ToolCard | None:
            try:
                args = CommandIdArgs.model_validate(arguments) if not isinstance(arguments, str | bytes) else None
            except ValidationError:
                return None
            return ToolCard(f"{verb} {args.id}", "execute" if verb == "Stop" else "read") if args else None

        return card

    def no_paths(arguments: Any, cwd: str) -> list[ResolvedPath]:
        return []

    return [
        (
            define_tool(
                "command_output",
                "Read what a background command (run_command with background) printed since the last read, and "
                "whether it is still running (with its exit code once it stopped). `wait` waits up to that many "
                "seconds for new output first, instead of polling in a loop.",
                CommandOutputArgs,
                command_output,
            ),
            "read",
            present("Output of"),
            no_paths,
        ),
        (
            define_tool(
                "command_wait",
                COMMAND_WAIT_DESCRIPTION,
                CommandWaitArgs,
                command_wait,
            ),
            "read",
            present("Wait for"),
            no_paths,
        ),
        (
            define_tool(
                "command_kill",
                "Stop a background command (and every process it started).",
                CommandIdArgs,
                command_kill,
            ),
            "execute",
            present("Stop"),
            no_paths,
        ),
    ]


def _fetch_tool(fetch_private: bool) -> Spec:
    async def fetch_url(args: FetchUrlArgs, execution: ToolExecution) -> str:
        outcome = await fetch_markdown(args.url, allow_private=fetch_private)
        head = f"Fetched {outcome.url} (HTTP {outcome.status}, {outcome.content_type})"
        if outcome.cut:
            head += "; the page was longer than the fetch limit and was cut"
        report(is_error=outcome.status >= 400, display={"url": outcome.url, "status": outcome.status})
        return f"{head}:\n\n{outcome.text}"

    def present(arguments: Any, cwd: str) -> ToolCard | None:
        try:
            args = FetchUrlArgs.model_validate(arguments) if not isinstance(arguments, str | bytes) else None
        except ValidationError:
            return None
        return ToolCard(f"Fetch {args.url}", "fetch") if args else None

    def no_paths(arguments: Any, cwd: str) -> list[ResolvedPath]:
        return []

    tool = define_tool(
        "fetch_url",
        "Fetch a web page (http or https GET) as Markdown: documentation the user gave you or the project "
        "points to. Not for private or local addresses. Long pages are cut, with the whole text saved to a file.",
        FetchUrlArgs,
        fetch_url,
    )
    return (dataclasses.replace(tool, meta={"domain": fetch_domain}), "fetch", present, no_paths)


def extra_tools(background: BackgroundCommands | None, *, fetch_private: bool = False) -> list[Spec]:
    return [*_background_tools(background), _fetch_tool(fetch_private)]
