"""The built-in coding tools: read_file, write_file, edit_file, list_files, grep and run_command.

Guarantees:

* Every file read and write and every command goes through the ``workspace`` service (so a front end can route
  them to the editor); only the listing and searching of directory trees (``list_files``, ``grep``) look at
  the local disk directly, and ``grep`` runs ripgrep under the same rules as any command.
* Relative paths resolve against the session's cwd. A path whose real location is outside the session's roots
  is refused with an error the model can act on (code ``OUTSIDE_ROOTS``) unless a gate called
  :func:`dsh.tools.grant_outside` for this call. The tools never ask for permission themselves.
* The path is resolved once: reads, writes, edits and a command's ``cwd`` use the real path that was checked,
  opened without following symlinks, so a symlink swapped in after the check cannot lead outside (the call
  fails with ``PATH_CHANGED`` instead; RFC 0010).
* Each tool's ``meta`` has ``kind`` (read, edit, search, execute), ``present(arguments, cwd) -> ToolCard | None``
  (title, absolute locations, the diff an edit is about to make) and ``paths(arguments, cwd) ->
  list[ResolvedPath]`` (what the call would touch, with ``inside`` computed against ``[cwd]``). Presenters are
  cheap, synchronous, never raise (invalid arguments give None) and depend on the arguments alone, never on
  the files, so a replay shows the cards the live session showed.
* ``write_file``, ``edit_file`` and ``run_command`` are prepared tools (``ToolDefinition.prepare``, see
  :mod:`dsh.services.tools`): prepare resolves the paths, reads the file and computes the exact change (an
  edit that cannot apply fails there, before anyone is asked), and apply writes exactly that change, after
  checking that the file is still what prepare read (else ``CHANGED_SINCE``, nothing written). An outside
  path is reported by prepare (``Prepared.outside``) and refused by apply unless granted.
* A failure is an error result (``is_error``; ``error.code`` one of ``OUTSIDE_ROOTS``, ``NOT_FOUND``,
  ``IS_DIRECTORY``, ``NOT_TEXT``, ``NO_MATCH``, ``AMBIGUOUS_MATCH``, ``NO_CHANGE``, ``BAD_PATTERN``,
  ``BAD_CWD``, ``PATH_CHANGED``, ``CHANGED_SINCE``). ``run_command`` is an error when the command exits non-zero, is killed, times out or is
  cancelled, and still returns its output. Results carry ``display`` for people: ``{"diff": {path, old_text,
  new_text}}`` for writes and edits (``old_text`` None for a new file), ``{exit_code, signal, timed_out,
  cancelled, truncated, terminal_id?}`` for commands. A tool body returns only text: ``is_error`` and
  ``display`` reach the :class:`ToolResult` through this plugin's ``tools/execute`` listener (a context
  variable per call), so they are set on results of ``ctx.tools.execute`` and absent when a definition's
  ``execute`` is called directly.
* Output for the model is bounded: :data:`READ_MAX_LINES` lines / :data:`READ_MAX_CHARS` characters per read
  (with the offset to continue from), :data:`LIST_MAX_ENTRIES` entries, :data:`GREP_MAX_MATCHES` matches,
  :data:`COMMAND_OUTPUT_LIMIT` bytes of command output (the tail), each cut announced in the text.
"""

from __future__ import annotations

import contextvars
import dataclasses
import difflib
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
from pydantic import BaseModel, Field, ValidationError

from dsh._text import plural
from dsh.services.tools import (
    Prepared,
    ToolCard,
    ToolDefinition,
    ToolExecution,
    ToolResult,
    define_prepared_tool,
    define_tool,
)
from dsh.tools._errors import OutsideRootsError, ToolError
from dsh.tools._paths import ResolvedPath, is_granted, is_within, resolve_path, revoke_grants
from dsh.tools._safeopen import PathChangedError
from dsh.tools._search import (
    GrepOutcome,
    glob_matcher,
    grep_python,
    grep_ripgrep,
    ripgrep_path,
    walk_files,
)
from dsh.tools._workspace import CommandResult, Workspace

if TYPE_CHECKING:
    from dsh.kernel import Next

__all__ = [
    "BUILTIN_TOOL_NAMES",
    "COMMAND_OUTPUT_LIMIT",
    "COMMAND_TIMEOUT_DEFAULT",
    "COMMAND_TIMEOUT_MAX",
    "GREP_MAX_MATCHES",
    "LIST_MAX_ENTRIES",
    "READ_MAX_CHARS",
    "READ_MAX_LINES",
    "build_tools",
    "finish_call",
]

READ_MAX_LINES = 2000
READ_MAX_CHARS = 100_000
READ_LINE_WIDTH = 2000
LIST_MAX_ENTRIES = 1000
GREP_MAX_MATCHES = 500
GREP_LINE_WIDTH = 400
COMMAND_OUTPUT_LIMIT = 30_000
COMMAND_TIMEOUT_DEFAULT = 120.0
COMMAND_TIMEOUT_MAX = 600.0
DIFF_MAX_CHARS = 20_000
TITLE_WIDTH = 80

BUILTIN_TOOL_NAMES = ("read_file", "write_file", "edit_file", "list_files", "grep", "run_command")

M = TypeVar("M", bound=BaseModel)


# -- is_error and display: the channel from a tool body to its result ----------------------------------------


def _dir_and_exists(path: str) -> tuple[bool, bool]:
    return os.path.isdir(path), os.path.lexists(path)


@dataclass(slots=True)
class _Outcome:
    is_error: bool = False
    display: dict[str, Any] | None = None


_outcome: contextvars.ContextVar[_Outcome | None] = contextvars.ContextVar("dsh_tool_outcome", default=None)


def _report(*, is_error: bool = False, display: dict[str, Any] | None = None) -> None:
    """Mark the running call's result as an error and/or attach ``display`` (a tool body returns only text)."""
    box = _outcome.get()
    if box is None:
        return
    box.is_error = box.is_error or is_error
    if display is not None:
        box.display = display


async def finish_call(execution: ToolExecution, next_: Next[ToolExecution, ToolResult]) -> ToolResult:
    """``tools/execute`` (appended, so inside any gate): give the call a channel for ``is_error`` and
    ``display``, apply it to the result, and revoke the call's grants once it ended, whatever happened."""
    box = _Outcome()
    token = _outcome.set(box)
    try:
        result = await next_()
    finally:
        _outcome.reset(token)
        revoke_grants(execution)
    if box.is_error or box.display is not None:
        result = dataclasses.replace(
            result,
            is_error=result.is_error or box.is_error,
            display=box.display if box.display is not None else result.display,
        )
    return result


# -- arguments ------------------------------------------------------------------------------------------------


class ReadFileArgs(BaseModel):
    path: str = Field(description="The file to read: relative to the working directory, or absolute.")
    offset: int | None = Field(default=None, ge=1, description="The 1-based line to start at (default 1).")
    limit: int | None = Field(
        default=None, ge=1, description=f"How many lines to read (default and maximum {READ_MAX_LINES})."
    )


class WriteFileArgs(BaseModel):
    path: str = Field(description="The file to create or overwrite: relative to the working directory, or absolute.")
    content: str = Field(description="The complete new content of the file.")


class EditFileArgs(BaseModel):
    path: str = Field(description="The file to edit: relative to the working directory, or absolute.")
    old_string: str = Field(description="The exact text to replace, including whitespace and indentation.")
    new_string: str = Field(description="The text to put in its place.")
    replace_all: bool = Field(default=False, description="Replace every occurrence instead of exactly one.")


class ListFilesArgs(BaseModel):
    path: str = Field(default=".", description="The directory to list (default: the working directory).")
    pattern: str | None = Field(
        default=None, description='A glob to filter by, e.g. "**/*.py", "src/**/test_*.py" or "*.md".'
    )


class GrepArgs(BaseModel):
    pattern: str = Field(description="A regular expression to search for, line by line.")
    path: str = Field(default=".", description="The directory or file to search (default: the working directory).")
    glob: str | None = Field(default=None, description='Only search files matching this glob, e.g. "*.py".')
    ignore_case: bool = Field(default=False, description="Match case-insensitively.")


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


# -- helpers --------------------------------------------------------------------------------------------------


def _shown(path: str, cwd: str) -> str:
    """*path* as a person reads it in a title: relative to *cwd* when below it, else absolute."""
    cwd = os.path.normpath(cwd)
    if path == cwd:
        return "."
    if is_within(path, cwd):
        return os.path.relpath(path, cwd)
    return path


def _parse(model: type[M], arguments: Any) -> M | None:
    try:
        if isinstance(arguments, str | bytes):
            return model.model_validate_json(arguments or "{}")
        return model.model_validate(arguments)
    except ValidationError:
        return None


def _first_line(command: str) -> str:
    lines = command.strip().splitlines()
    line = lines[0] if lines else ""
    if len(lines) > 1:
        line += " …"
    if len(line) > TITLE_WIDTH:
        line = line[: TITLE_WIDTH - 1] + "…"
    return line


def _changed(path: str) -> ToolError:
    return ToolError(
        f"{path} changed while in use (a symlink appeared in it since it was checked); nothing was read or "
        "written through it. Check the path and try again.",
        "PATH_CHANGED",
    )


def _crlf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\n", "\r\n")


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _number_lines(text: str, offset: int, limit: int) -> str:
    """``cat -n`` style: the line number right-aligned in 6 columns, a tab, the line (without its ending)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    more = len(lines) > limit
    out: list[str] = []
    used = 0
    for index, line in enumerate(lines[:limit]):
        line = line.removesuffix("\r")
        if len(line) > READ_LINE_WIDTH:
            line = line[:READ_LINE_WIDTH] + " … [line truncated]"
        entry = f"{offset + index:>6}\t{line}"
        if out and used + len(entry) > READ_MAX_CHARS:
            more = True
            break
        out.append(entry)
        used += len(entry) + 1
    if not out:
        return f"[offset {offset} is past the end of the file]" if offset > 1 else "[empty file]"
    if more:
        out.append(f"[… the file continues: read on with offset={offset + len(out)}]")
    return "\n".join(out)


def _unified_diff(old: str, new: str, shown: str) -> str:
    diff = "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{shown}", f"b/{shown}", n=3
        )
    )
    if len(diff) > DIFF_MAX_CHARS:
        diff = diff[:DIFF_MAX_CHARS] + "\n[… diff truncated]\n"
    return diff


def _command_text(result: CommandResult, timeout: float) -> str:
    parts: list[str] = []
    if result.truncated:
        parts.append(f"[output truncated: showing the last {COMMAND_OUTPUT_LIMIT} bytes]")
    output = result.output.rstrip("\n")
    parts.append(output if output else "(no output)")
    if result.timed_out:
        parts.append(f"[timed out after {timeout:g} s]")
    elif result.cancelled:
        parts.append("[cancelled]")
    elif result.exit_code is not None:
        parts.append(f"[exit code: {result.exit_code}]")
    elif result.signal is not None:
        parts.append(f"[killed by {result.signal}]")
    return "\n".join(parts)


# -- the tools ------------------------------------------------------------------------------------------------


class _Tools:
    """The six tools over one workspace; each method is a tool body ``(args, execution) -> text``."""

    def __init__(self, workspace: Workspace) -> None:
        self.ws = workspace

    def target(self, execution: ToolExecution, raw: str) -> ResolvedPath:
        """*raw* resolved; refused when outside the roots and not granted for this call."""
        resolved = self.ws.resolve(execution, raw)
        if not resolved.inside and not is_granted(execution, resolved.real, resolved=True):
            cwd = self.ws.cwd(execution)
            raise OutsideRootsError(
                f"path {raw!r} ({resolved.path}) is outside the session's directory {cwd}; tools may only use "
                "paths inside it unless the user grants access. Use a path inside the directory, or ask the "
                "user to allow this one."
            )
        return resolved

    async def read_text(
        self, execution: ToolExecution, target: ResolvedPath, line: int | None = None, limit: int | None = None
    ) -> str:
        path = target.path
        try:
            return await self.ws.read(execution, path, line, limit, real=target.real)
        except PathChangedError:
            raise _changed(path) from None
        except FileNotFoundError:
            raise ToolError(f"file not found: {path}", "NOT_FOUND") from None
        except IsADirectoryError:
            raise ToolError(
                f"{path} is a directory, not a file: use list_files to see what it holds", "IS_DIRECTORY"
            ) from None
        except UnicodeDecodeError:
            raise ToolError(f"{path} is not a UTF-8 text file", "NOT_TEXT") from None

    async def _write(self, execution: ToolExecution, target: ResolvedPath, content: str) -> None:
        try:
            await self.ws.write(execution, target.path, content, real=target.real)
        except PathChangedError:
            raise _changed(target.path) from None

    async def read_file(self, args: ReadFileArgs, execution: ToolExecution) -> str:
        target = self.target(execution, args.path)
        offset = args.offset or 1
        limit = min(args.limit or READ_MAX_LINES, READ_MAX_LINES)
        text = await self.read_text(execution, target, offset, limit + 1)
        return _number_lines(text, offset, limit)

    def locate(self, execution: ToolExecution, raw: str) -> ResolvedPath:
        """*raw* resolved against the session's roots, not refused yet: prepare reports outside paths (the
        pipeline asks for them) and apply checks the grant (:meth:`checked`)."""
        return self.ws.resolve(execution, raw)

    def checked(self, execution: ToolExecution, target: ResolvedPath, raw: str) -> None:
        """Refuse *target* at apply time when it is outside the roots and no gate granted it for this call."""
        if not target.inside and not is_granted(execution, target.real, resolved=True):
            cwd = self.ws.cwd(execution)
            raise OutsideRootsError(
                f"path {raw!r} ({target.path}) is outside the session's directory {cwd}; tools may only use "
                "paths inside it unless the user grants access. Use a path inside the directory, or ask the "
                "user to allow this one."
            )

    async def _current(self, execution: ToolExecution, target: ResolvedPath) -> str | None:
        """The file's text now (None when it does not exist or cannot be read: it is replaced either way)."""
        is_dir, exists = await anyio.to_thread.run_sync(_dir_and_exists, target.real)
        if is_dir:
            raise ToolError(f"{target.path} is a directory, not a file", "IS_DIRECTORY")
        if not exists:  # a new file is not read first (through an editor, that read would report it missing)
            return None
        try:
            return await self.ws.read(execution, target.path, real=target.real)
        except IsADirectoryError:
            raise ToolError(f"{target.path} is a directory, not a file", "IS_DIRECTORY") from None
        except PathChangedError:
            raise _changed(target.path) from None
        except Exception:  # unreadable: it is replaced either way
            return None

    async def _unchanged_since(
        self, execution: ToolExecution, target: ResolvedPath, before: str | None, *, edit: bool = False
    ) -> None:
        """Apply's guard: the file is still what prepare read (the same way: an edit reads through the workspace
        only, a write looks at the disk first), else ``CHANGED_SINCE`` and nothing is written."""
        if edit:
            try:
                now: str | None = await self.read_text(execution, target)
            except ToolError as exc:
                if exc.code != "NOT_FOUND":
                    raise
                now = None
        else:
            now = await self._current(execution, target)
        if now != before:
            shown = _shown(target.path, self.ws.cwd(execution))
            what = "was created" if before is None else ("was deleted" if now is None else "changed")
            raise ToolError(
                f"{shown} {what} since this call was prepared (while it waited for approval); nothing was "
                "written. Read the file again and redo the change.",
                "CHANGED_SINCE",
            )

    async def write_file(self, args: WriteFileArgs, execution: ToolExecution) -> Prepared:
        target = self.locate(execution, args.path)
        old = await self._current(execution, target)

        async def apply() -> str:
            self.checked(execution, target, args.path)
            await self._unchanged_since(execution, target, old)
            await self._write(execution, target, args.content)
            _report(display={"diff": {"path": target.path, "old_text": old, "new_text": args.content}})
            shown = _shown(target.path, self.ws.cwd(execution))
            lines = args.content.count("\n") + (0 if args.content.endswith("\n") or not args.content else 1)
            verb = "Created" if old is None else "Overwrote"
            size = plural(len(args.content.encode("utf-8")), "byte")
            return f"{verb} {shown} ({plural(lines, 'line')}, {size})."

        return Prepared(
            apply, (target.path,), () if target.inside else (target.path,), (target.path, old, args.content)
        )

    async def edit_file(self, args: EditFileArgs, execution: ToolExecution) -> Prepared:
        target = self.locate(execution, args.path)
        shown = _shown(target.path, self.ws.cwd(execution))
        if not args.old_string:
            raise ToolError("old_string is empty: to create or overwrite a whole file use write_file", "NO_MATCH")
        if args.old_string == args.new_string:
            raise ToolError("old_string and new_string are identical: there is nothing to change", "NO_CHANGE")
        text = await self.read_text(execution, target)
        old_string, new_string = args.old_string, args.new_string
        count = text.count(old_string)
        if count == 0 and "\r\n" in text and "\n" in old_string and "\r\n" not in old_string:
            old_string, new_string = _crlf(old_string), _crlf(new_string)  # the model saw lines, not CRLF
            count = text.count(old_string)
        if count == 0:
            raise ToolError(
                f"old_string not found in {shown}: it must match the file exactly, including whitespace and "
                "indentation (read_file's line-number prefixes are not part of the file); read the file again "
                "and copy the text",
                "NO_MATCH",
            )
        if count > 1 and not args.replace_all:
            raise ToolError(
                f"old_string matches {count} times in {shown}; add context to make it unique or set replace_all",
                "AMBIGUOUS_MATCH",
            )
        new_text = text.replace(old_string, new_string) if args.replace_all else text.replace(old_string, new_string, 1)

        async def apply() -> str:
            self.checked(execution, target, args.path)
            await self._unchanged_since(execution, target, text, edit=True)
            await self._write(execution, target, new_text)
            line = _line_of(text, text.find(old_string))
            _report(display={"diff": {"path": target.path, "old_text": text, "new_text": new_text}, "line": line})
            replaced = f"{count} occurrences" if count > 1 else "1 occurrence"
            return f"Edited {shown}: replaced {replaced}.\n{_unified_diff(text, new_text, shown)}"

        return Prepared(apply, (target.path,), () if target.inside else (target.path,), (target.path, text, new_text))

    async def list_files(self, args: ListFilesArgs, execution: ToolExecution) -> str:
        target = self.target(execution, args.path)
        cwd = self.ws.cwd(execution)
        base = _shown(target.path, cwd)
        matcher = glob_matcher(args.pattern) if args.pattern else None
        signal = execution.signal

        def collect() -> tuple[list[str], bool]:
            if not os.path.exists(target.path):
                raise ToolError(f"no such file or directory: {target.path}", "NOT_FOUND")
            if os.path.isfile(target.path):
                return [base], False
            found: list[str] = []
            for _path, relative in walk_files(target.path, signal=signal):
                if matcher is not None and not matcher.fullmatch(relative):
                    continue
                if len(found) == LIST_MAX_ENTRIES:
                    return found, True
                found.append(relative if base == "." else os.path.join(base, relative))
            return found, False

        entries, cut = await anyio.to_thread.run_sync(collect, abandon_on_cancel=True)
        if not entries:
            return f"[no files match {args.pattern!r} in {base}]" if args.pattern else f"[no files in {base}]"
        if cut:
            entries.append(f"[… more than {LIST_MAX_ENTRIES} entries: narrow the path or the pattern]")
        return "\n".join(entries)

    async def grep(self, args: GrepArgs, execution: ToolExecution) -> str:
        target = self.target(execution, args.path)
        if not await anyio.Path(target.path).exists():
            raise ToolError(f"no such file or directory: {target.path}", "NOT_FOUND")
        cwd = self.ws.cwd(execution)
        shown = _shown(target.path, cwd)
        rg = ripgrep_path()
        outcome: GrepOutcome
        if rg is not None and await anyio.Path(cwd).is_dir():
            outcome = await grep_ripgrep(
                rg,
                args.pattern,
                shown,
                cwd=cwd,
                glob=args.glob,
                ignore_case=args.ignore_case,
                max_matches=GREP_MAX_MATCHES,
                line_width=GREP_LINE_WIDTH,
                signal=execution.signal,
            )
        else:
            search = partial(
                grep_python,
                args.pattern,
                target.path,
                cwd=cwd,
                glob=args.glob,
                ignore_case=args.ignore_case,
                max_matches=GREP_MAX_MATCHES,
                line_width=GREP_LINE_WIDTH,
                signal=execution.signal,
            )
            outcome = await anyio.to_thread.run_sync(search, abandon_on_cancel=True)
        if outcome.error == "cancelled":
            _report(is_error=True)
            return "[cancelled]"
        if outcome.error is not None:
            raise ToolError(f"grep failed: {outcome.error}", "BAD_PATTERN")
        if not outcome.lines:
            where = "the working directory" if shown == "." else shown
            return f"No matches for {args.pattern!r} in {where}."
        lines = outcome.lines
        if outcome.truncated:
            lines = [*lines, f"[… more than {len(lines)} matches: narrow the pattern, the path or the glob]"]
        return "\n".join(lines)

    async def run_command(self, args: RunCommandArgs, execution: ToolExecution) -> Prepared:
        cwd = self.ws.cwd(execution)
        where = self.locate(execution, args.cwd) if args.cwd else None
        run_in = where.path if where is not None else cwd

        async def apply() -> str:
            if where is not None and args.cwd is not None:
                self.checked(execution, where, args.cwd)
            try:
                result = await self.ws.run(
                    execution,
                    args.command,
                    run_in,
                    args.timeout,
                    COMMAND_OUTPUT_LIMIT,
                    real_cwd=where.real if where is not None else "",
                )
            except PathChangedError:
                raise _changed(run_in) from None
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
            _report(is_error=failed, display=display)
            return _command_text(result, args.timeout)

        outside = (where.path,) if where is not None and not where.inside else ()
        paths = (where.path,) if where is not None else ()
        return Prepared(apply, paths, outside, command=args.command, cwd=run_in)


# -- presentation (cards) -------------------------------------------------------------------------------------


def _resolve(raw: str, cwd: str) -> ResolvedPath:
    return resolve_path(raw, cwd, [cwd])


def _present_read(arguments: Any, cwd: str) -> ToolCard | None:
    args = _parse(ReadFileArgs, arguments)
    if args is None:
        return None
    path = _resolve(args.path, cwd).path
    return ToolCard(f"Read {_shown(path, cwd)}", "read", ((path, args.offset or 1),))


# Cards are drawn from the arguments alone, never from the files: a replayed session must show the same cards
# as the live one did, and the files have changed since. What only the run knows (the file's old text, the
# line of an edit) comes with the result's ``display``.


def _present_write(arguments: Any, cwd: str) -> ToolCard | None:
    args = _parse(WriteFileArgs, arguments)
    if args is None:
        return None
    path = _resolve(args.path, cwd).path
    return ToolCard(f"Write {_shown(path, cwd)}", "edit", ((path, None),))


def _present_edit(arguments: Any, cwd: str) -> ToolCard | None:
    args = _parse(EditFileArgs, arguments)
    if args is None:
        return None
    path = _resolve(args.path, cwd).path
    return ToolCard(f"Edit {_shown(path, cwd)}", "edit", ((path, None),), (path, args.old_string, args.new_string))


def _present_list(arguments: Any, cwd: str) -> ToolCard | None:
    args = _parse(ListFilesArgs, arguments)
    if args is None:
        return None
    path = _resolve(args.path, cwd).path
    title = f"List {_shown(path, cwd)}" + (f" ({args.pattern})" if args.pattern else "")
    return ToolCard(title, "search", ((path, None),))


def _present_grep(arguments: Any, cwd: str) -> ToolCard | None:
    args = _parse(GrepArgs, arguments)
    if args is None:
        return None
    path = _resolve(args.path, cwd).path
    pattern = args.pattern if len(args.pattern) <= TITLE_WIDTH // 2 else args.pattern[: TITLE_WIDTH // 2] + "…"
    title = f"Grep {pattern!r} in {_shown(path, cwd)}" + (f" ({args.glob})" if args.glob else "")
    return ToolCard(title, "search", ((path, None),))


def _present_run(arguments: Any, cwd: str) -> ToolCard | None:
    args = _parse(RunCommandArgs, arguments)
    if args is None:
        return None
    locations = ((_resolve(args.cwd, cwd).path, None),) if args.cwd else ()
    return ToolCard(f"Run {_first_line(args.command)}", "execute", locations)


def _paths_of(model: type[BaseModel], *fields: str) -> Callable[[Any, str], list[ResolvedPath]]:
    def paths(arguments: Any, cwd: str) -> list[ResolvedPath]:
        args = _parse(model, arguments)
        if args is None:
            return []
        values = [getattr(args, name) for name in fields]
        return [_resolve(value, cwd) for value in values if isinstance(value, str)]

    return paths


# -- registration ---------------------------------------------------------------------------------------------

_DESCRIPTIONS = {
    "read_file": (
        "Read a text file. Lines come numbered like `cat -n` (right-aligned number, a tab, the line); the "
        f"numbers are not part of the file. Reads up to {READ_MAX_LINES} lines from `offset` (1-based); the "
        "output says where to continue when the file is longer."
    ),
    "write_file": (
        "Create a file or replace its whole content (parent directories are created). Prefer edit_file to change "
        "part of an existing file."
    ),
    "edit_file": (
        "Replace exact text in a file: `old_string` must match the file exactly once (include enough "
        "surrounding lines to make it unique), or set `replace_all` to replace every occurrence. Returns a "
        "unified diff of the change."
    ),
    "list_files": (
        "List the files below a directory, recursively, as paths relative to the working directory, optionally "
        f"filtered by a glob. Skips .git, node_modules, .venv and caches; at most {LIST_MAX_ENTRIES} entries."
    ),
    "grep": (
        "Search file contents for a regular expression. Prints `path:line:text` for each matching line; at "
        f"most {GREP_MAX_MATCHES} matches. Skips hidden, binary and ignored files and directories."
    ),
    "run_command": (
        "Run a shell command (bash) in the working directory and return its combined stdout and stderr and "
        "its exit code. It has no input (stdin is empty), so interactive programs get end-of-file. It is "
        f"killed after `timeout` seconds, with any background processes it started; output beyond "
        f"{COMMAND_OUTPUT_LIMIT} bytes keeps the end."
    ),
}


def build_tools(workspace: Workspace) -> list[ToolDefinition]:
    """The six tool definitions over *workspace*, each with ``meta`` {kind, present, paths}."""
    tools = _Tools(workspace)
    specs: list[tuple[ToolDefinition, str, Callable[[Any, str], ToolCard | None], Callable[..., Any]]] = [
        (
            define_tool("read_file", _DESCRIPTIONS["read_file"], ReadFileArgs, tools.read_file),
            "read",
            _present_read,
            _paths_of(ReadFileArgs, "path"),
        ),
        (
            define_prepared_tool("write_file", _DESCRIPTIONS["write_file"], WriteFileArgs, tools.write_file),
            "edit",
            _present_write,
            _paths_of(WriteFileArgs, "path"),
        ),
        (
            define_prepared_tool("edit_file", _DESCRIPTIONS["edit_file"], EditFileArgs, tools.edit_file),
            "edit",
            _present_edit,
            _paths_of(EditFileArgs, "path"),
        ),
        (
            define_tool("list_files", _DESCRIPTIONS["list_files"], ListFilesArgs, tools.list_files),
            "search",
            _present_list,
            _paths_of(ListFilesArgs, "path"),
        ),
        (
            define_tool("grep", _DESCRIPTIONS["grep"], GrepArgs, tools.grep),
            "search",
            _present_grep,
            _paths_of(GrepArgs, "path"),
        ),
        (
            define_prepared_tool("run_command", _DESCRIPTIONS["run_command"], RunCommandArgs, tools.run_command),
            "execute",
            _present_run,
            _paths_of(RunCommandArgs, "cwd"),
        ),
    ]
    return [
        dataclasses.replace(tool, meta={"kind": kind, "present": present, "paths": paths})
        for tool, kind, present, paths in specs
    ]
