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
  :mod:`dsh.services.tools`): prepare resolves the paths, checks the read ledger, reads the file and computes
  the exact change with the edit matcher (an edit that cannot apply fails there, before anyone is asked), and
  apply writes exactly that change, after checking that the file is still what prepare read (else
  ``CHANGED_SINCE``, nothing written). An outside path is reported by prepare (``Prepared.outside``) and
  refused by apply unless granted.
* A failure is an error result (``is_error``; ``error.code`` one of ``OUTSIDE_ROOTS``, ``NOT_FOUND``,
  ``IS_DIRECTORY``, ``NOT_TEXT``, ``NO_MATCH``, ``AMBIGUOUS_MATCH``, ``NO_CHANGE``, ``BAD_PATTERN``,
  ``BAD_CWD``, ``PATH_CHANGED``). ``run_command`` is an error when the command exits non-zero, is killed, times out or is
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
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import anyio
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError

from dsh._text import plural
from dsh.services.tools import (
    Prepared,
    ToolCard,
    ToolDefinition,
    ToolExecution,
    ToolOutput,
    ToolResult,
    define_prepared_tool,
    define_tool,
)
from dsh.tools._background import BackgroundCommands
from dsh.tools._budget import spill, spill_roots
from dsh.tools._catalogue import ASKS, CONCURRENT
from dsh.tools._delete import delete_file_spec
from dsh.tools._edits import Edit, plan_edits
from dsh.tools._errors import OutsideRootsError, ToolError
from dsh.tools._extra_tools import extra_tools, start_background
from dsh.tools._filetext import READ_LINE_WIDTH, Binary, keep_conventions, number_lines, sniff_binary
from dsh.tools._images import read_image
from dsh.tools._ledger import ReadLedger
from dsh.tools._offload import CPU_TIMEOUT, run_cpu
from dsh.tools._paths import ResolvedPath, is_granted, is_within, resolve_path, revoke_grants
from dsh.tools._placeholders import find_placeholder
from dsh.tools._safeopen import PathChangedError
from dsh.tools._search import (
    GrepOutcome,
    GrepQuery,
    glob_files,
    grep_python,
    grep_ripgrep,
    list_directory,
    ripgrep_path,
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
READ_WHOLE_MAX_BYTES = 8 * 1024 * 1024
"""A file up to this size is read whole, so the result can say how many lines remain."""
LIST_MAX_ENTRIES = 1000
GREP_MAX_MATCHES = 250
"""Lines of content a grep returns unless ``head_limit`` says otherwise."""
GREP_MAX_FILES = 100
"""File names (or counts) a grep returns unless ``head_limit`` says otherwise."""
GLOB_MAX_FILES = 100
GREP_LINE_WIDTH = 400
COMMAND_OUTPUT_LIMIT = 8 * 1024 * 1024
"""Bytes of a command's output captured (the first and the last half when it prints more): what the model sees
is then cut to the output budget (:mod:`dsh.tools._budget`) with the whole capture in a spill file."""
COMMAND_TIMEOUT_DEFAULT = 120.0
COMMAND_TIMEOUT_MAX = 600.0
DIFF_MAX_CHARS = 20_000
TITLE_WIDTH = 80

BUILTIN_TOOL_NAMES = (
    "read_file",
    "write_file",
    "edit_file",
    "list_files",
    "glob",
    "grep",
    "run_command",
    "command_output",
    "command_kill",
    "fetch_url",
)


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


class EditItem(BaseModel):
    old_string: str = Field(description="The text to replace, as in the file (whitespace and indentation included).")
    new_string: str = Field(description="The text to put in its place.")
    replace_all: bool = Field(default=False, description="Replace every occurrence instead of exactly one.")


class EditFileArgs(BaseModel):
    path: str = Field(description="The file to edit: relative to the working directory, or absolute.")
    old_string: str | None = Field(
        default=None, description="The text to replace, as in the file (whitespace and indentation included)."
    )
    new_string: str | None = Field(default=None, description="The text to put in its place.")
    replace_all: bool = Field(default=False, description="Replace every occurrence instead of exactly one.")
    edits: list[EditItem] | None = Field(
        default=None,
        description="Several changes to the same file, applied in order and written once (instead of "
        "old_string/new_string); if one fails, nothing is written.",
    )

    def edit_list(self) -> tuple[list[Edit], bool]:
        """The edits to apply and whether they came as a list; raises ``BAD_ARGUMENTS`` on a mix or neither."""
        if self.edits is not None:
            if self.old_string is not None or self.new_string is not None:
                raise ToolError("give either edits or old_string/new_string, not both", "BAD_ARGUMENTS")
            if not self.edits:
                raise ToolError("edits is empty: there is nothing to change", "NO_CHANGE")
            return [Edit(e.old_string, e.new_string, e.replace_all) for e in self.edits], True
        if self.old_string is None or self.new_string is None:
            raise ToolError("give old_string and new_string (or an edits list)", "BAD_ARGUMENTS")
        return [Edit(self.old_string, self.new_string, self.replace_all)], False


class ListFilesArgs(BaseModel):
    path: str = Field(default=".", description="The directory to list (default: the working directory).")


class GlobArgs(BaseModel):
    pattern: str = Field(description='A glob over paths, e.g. "src/**/*.py", "**/test_*.py" or "*.md".')
    path: str = Field(default=".", description="The directory to search below (default: the working directory).")


class GrepArgs(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    pattern: str = Field(description="A regular expression (Rust/Python syntax) to search for, line by line.")
    path: str = Field(default=".", description="The directory or file to search (default: the working directory).")
    output_mode: Literal["files_with_matches", "content", "count"] = Field(
        default="files_with_matches",
        description="files_with_matches (default): the names of matching files; content: the matching lines "
        "as path:line:text; count: path:number of matching lines.",
    )
    head_limit: int | None = Field(
        default=None,
        ge=1,
        description=f"At most this many entries (default {GREP_MAX_FILES} files or counts, "
        f"{GREP_MAX_MATCHES} lines of content).",
    )
    context: int | None = Field(
        default=None, ge=0, le=50, description="Lines of context around each match (content mode)."
    )
    before: int | None = Field(
        default=None, ge=0, le=50, alias="-B", description="Lines of context before each match (content mode)."
    )
    after: int | None = Field(
        default=None, ge=0, le=50, alias="-A", description="Lines of context after each match (content mode)."
    )
    around: int | None = Field(
        default=None, ge=0, le=50, alias="-C", description="Lines of context before and after (same as context)."
    )
    fixed_strings: bool = Field(default=False, description="Take the pattern as literal text, not a regex.")
    case_insensitive: bool = Field(
        default=False,
        validation_alias=AliasChoices("case_insensitive", "ignore_case", "-i"),
        description="Match case-insensitively.",
    )
    glob: str | None = Field(default=None, description='Only search files matching this glob, e.g. "*.py".')
    type: str | None = Field(default=None, description='Only search files of this type, e.g. "py", "ts", "rust", "md".')


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


def _session_of(execution: ToolExecution) -> str:
    agent = execution.agent
    return agent.session.id if agent is not None else ""


def _refuse_placeholder(new: str, old: str | None, *, known: str = "", field: str) -> None:
    found = find_placeholder(new, old, known=known)
    if found is not None:
        raise ToolError(
            f"{field} contains the omission placeholder {found!r} where the file has real code: writing it would "
            "delete that code. Write out the complete text (or make a smaller edit that leaves the rest alone)",
            "PLACEHOLDER",
        )


def _local_size(real: str) -> int | None:
    try:
        return os.stat(real).st_size
    except OSError:
        return None


def _edit_summary(rules: tuple[str, ...], counts: tuple[int, ...], listed: bool) -> str:
    def one(rule: str, count: int) -> str:
        places = "1 occurrence" if count == 1 else f"{count} occurrences"
        return places if rule == "exact" else f"{places}, matched ignoring {_RULE_WORDS[rule]}"

    if not listed:
        return "replaced " + one(rules[0], counts[0])
    parts = [f"edits[{i}] {one(rule, count)}" for i, (rule, count) in enumerate(zip(rules, counts, strict=True))]
    return f"applied {len(rules)} edits (" + "; ".join(parts) + ")"


_RULE_WORDS = {
    "trailing-whitespace": "trailing whitespace",
    "indentation": "indentation (new_string re-indented to the file's)",
    "unicode-punctuation": "typographic quotes, dashes and spaces",
}


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

    def __init__(
        self,
        workspace: Workspace,
        ledger: ReadLedger,
        background: BackgroundCommands | None,
        spill_root: str | None = None,
    ) -> None:
        self.ws = workspace
        self.ledger = ledger
        self.background = background
        self.spill_root = spill_root

    def target(self, execution: ToolExecution, raw: str) -> ResolvedPath:
        """*raw* resolved; refused when outside the roots and not granted for this call."""
        resolved = self.ws.resolve(execution, raw)
        spilled = any(is_within(resolved.real, root) for root in spill_roots())  # a cut result's full output
        if not resolved.inside and not spilled and not is_granted(execution, resolved.real, resolved=True):
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

    async def read_file(self, args: ReadFileArgs, execution: ToolExecution) -> ToolOutput:
        target = self.target(execution, args.path)
        if await anyio.Path(target.real or target.path).is_dir():
            listing = await self.list_files(ListFilesArgs(path=args.path), execution)
            return f"{_shown(target.path, self.ws.cwd(execution))} is a directory; its files:\n{listing}"
        binary = await anyio.to_thread.run_sync(sniff_binary, target.real or target.path)
        if binary is not None:
            return await self.read_binary(execution, target, binary)
        offset = args.offset or 1
        limit = min(args.limit or READ_MAX_LINES, READ_MAX_LINES)
        size = await anyio.to_thread.run_sync(_local_size, target.real or target.path)
        total: int | None = None
        if size is not None and size <= READ_WHOLE_MAX_BYTES:
            whole = await self.read_text(execution, target)
            parts = whole.split("\n")
            total = len(parts) - (1 if parts[-1] == "" else 0)
            text = "\n".join(parts[offset - 1 : offset - 1 + limit + 1])
        else:
            text = await self.read_text(execution, target, offset, limit + 1)
        await anyio.to_thread.run_sync(self.ledger.record, _session_of(execution), target.real)
        return number_lines(text, offset, limit, max_chars=READ_MAX_CHARS, total=total)

    async def read_binary(self, execution: ToolExecution, target: ResolvedPath, binary: Binary) -> ToolOutput:
        """A file that is not text: an image (PNG, JPEG, GIF, WebP by its bytes, at most 20 MB) is returned as an
        image (:mod:`._images`; a model without vision gets its description instead); anything else is refused
        with its size and type."""
        shown = _shown(target.path, self.ws.cwd(execution))
        if binary.mime.startswith("image/") and target.real:
            return await read_image(target.real, shown, binary.mime, binary.size)
        raise ToolError(
            f"{shown} is a binary file ({binary.mime}, {plural(binary.size, 'byte')}), not text: read_file "
            "shows only text files",
            "NOT_TEXT",
        )

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

    async def _old_text(self, execution: ToolExecution, target: ResolvedPath, *, must_exist: bool) -> str | None:
        """The current text of an existing file, None for a new one; the ledger is checked first. With
        *must_exist* (an edit) a file missing on this disk is still read through the workspace (an editor may
        hold it) and fails ``NOT_FOUND`` when nobody has it."""
        is_dir, exists = await anyio.to_thread.run_sync(_dir_and_exists, target.real)
        if is_dir:
            raise ToolError(f"{target.path} is a directory, not a file", "IS_DIRECTORY")
        if not exists:  # a new file is not read first (through an editor, that read would report it missing)
            return await self.read_text(execution, target) if must_exist else None
        if not must_exist and await anyio.to_thread.run_sync(sniff_binary, target.real) is not None:
            return None  # not text: read_file cannot show it, so it cannot have been read; replaced as a whole
        if target.inside:  # an outside path is checked by apply, once a gate granted it (refused before)
            await self._check_read(execution, target)
        return await self.read_text(execution, target)

    async def _check_read(self, execution: ToolExecution, target: ResolvedPath) -> None:
        shown = _shown(target.path, self.ws.cwd(execution))
        await anyio.to_thread.run_sync(self.ledger.check, _session_of(execution), target.real, shown)

    async def _now(self, execution: ToolExecution, target: ResolvedPath, *, edit: bool) -> str | None:
        """The file's text as apply finds it (None: missing, or a binary file that write_file replaces whole)."""
        if edit:
            try:
                return await self.read_text(execution, target)
            except ToolError as exc:
                if exc.code != "NOT_FOUND":
                    raise
                return None
        is_dir, exists = await anyio.to_thread.run_sync(_dir_and_exists, target.real)
        if is_dir:
            raise ToolError(f"{target.path} is a directory, not a file", "IS_DIRECTORY")
        if not exists or await anyio.to_thread.run_sync(sniff_binary, target.real) is not None:
            return None
        try:
            return await self.read_text(execution, target)
        except ToolError as exc:
            if exc.code == "NOT_FOUND":
                return None
            raise

    async def _unchanged_since(
        self, execution: ToolExecution, target: ResolvedPath, before: str | None, *, edit: bool = False
    ) -> None:
        """Apply's guard: the file is still what prepare read, else ``CHANGED_SINCE`` and nothing is written."""
        now = await self._now(execution, target, edit=edit)
        if now != before:
            shown = _shown(target.path, self.ws.cwd(execution))
            what = "was created" if before is None else ("was deleted" if now is None else "changed")
            raise ToolError(
                f"{shown} {what} since this call was prepared (while it waited for approval); nothing was "
                "written. Read the file again and redo the change.",
                "CHANGED_SINCE",
            )

    async def write_file(self, args: WriteFileArgs, execution: ToolExecution) -> Prepared:
        """Prepared: the ledger, the placeholder check and the file's conventions decide the exact new text
        before anyone is asked; apply writes exactly that."""
        target = self.locate(execution, args.path)
        old = await self._old_text(execution, target, must_exist=False)
        _refuse_placeholder(args.content, old, field="content")
        content = keep_conventions(args.content, old)

        async def apply() -> str:
            self.checked(execution, target, args.path)
            if not target.inside and old is not None:
                await self._check_read(execution, target)
            await self._unchanged_since(execution, target, old)
            await self._write(execution, target, content)
            await anyio.to_thread.run_sync(self.ledger.record, _session_of(execution), target.real)
            _report(display={"diff": {"path": target.path, "old_text": old, "new_text": content}})
            shown = _shown(target.path, self.ws.cwd(execution))
            lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
            verb = "Created" if old is None else "Overwrote"
            return f"{verb} {shown} ({plural(lines, 'line')}, {plural(len(content.encode('utf-8')), 'byte')})."

        return Prepared(apply, (target.path,), () if target.inside else (target.path,), (target.path, old, content))

    async def edit_file(self, args: EditFileArgs, execution: ToolExecution) -> Prepared:
        """Prepared: the matcher computes the new text (an edit that cannot apply fails here, before anyone is
        asked, and the approval shows the real diff); apply writes exactly that."""
        target = self.locate(execution, args.path)
        shown = _shown(target.path, self.ws.cwd(execution))
        edits, listed = args.edit_list()
        text = await self._old_text(execution, target, must_exist=True)
        assert text is not None
        for index, edit in enumerate(edits):
            where = f"edits[{index}].new_string" if listed else "new_string"
            _refuse_placeholder(edit.new_string, edit.old_string, known=text, field=where)
        plan = await run_cpu(  # off the event loop: a miss on a large file is CPU-heavy (issue 34)
            partial(plan_edits, text, edits, shown=shown, listed=listed),
            timeout=CPU_TIMEOUT,
            what=f"matching the edit in {shown}",
        )

        async def apply() -> str:
            self.checked(execution, target, args.path)
            if not target.inside:
                await self._check_read(execution, target)
            await self._unchanged_since(execution, target, text, edit=True)
            await self._write(execution, target, plan.text)
            await anyio.to_thread.run_sync(self.ledger.record, _session_of(execution), target.real)
            _report(display={"diff": {"path": target.path, "old_text": text, "new_text": plan.text}, "line": plan.line})
            summary = _edit_summary(plan.rules, plan.counts, listed)
            return f"Edited {shown}: {summary}.\n{_unified_diff(text, plan.text, shown)}"

        return Prepared(apply, (target.path,), () if target.inside else (target.path,), (target.path, text, plan.text))

    async def list_files(self, args: ListFilesArgs, execution: ToolExecution) -> str:
        target = self.target(execution, args.path)
        cwd = self.ws.cwd(execution)
        base = _shown(target.path, cwd)

        def collect() -> tuple[list[str], int]:
            if not os.path.exists(target.path):
                raise ToolError(f"no such file or directory: {target.path}", "NOT_FOUND")
            if os.path.isfile(target.path):
                return [base], 1
            names, total = list_directory(target.path, limit=LIST_MAX_ENTRIES)
            return [name if base == "." else f"{base}/{name}" for name in names], total

        entries, total = await anyio.to_thread.run_sync(collect, abandon_on_cancel=True)
        if not entries:
            return f"[no files in {base}]"
        if total > len(entries):
            entries.append(f"[… {total - len(entries)} more entries: use glob with a pattern to narrow]")
        return "\n".join(entries)

    async def glob(self, args: GlobArgs, execution: ToolExecution) -> str:
        target = self.target(execution, args.path)
        cwd = self.ws.cwd(execution)
        base = _shown(target.path, cwd)
        if not await anyio.Path(target.path).is_dir():
            raise ToolError(f"not a directory: {target.path}", "NOT_FOUND")
        search = partial(glob_files, args.pattern, target.path, limit=GLOB_MAX_FILES, signal=execution.signal)
        found, total = await anyio.to_thread.run_sync(search, abandon_on_cancel=True)
        if not found:
            return f"[no files match {args.pattern!r} in {base}]"
        lines = [relative if base == "." else f"{base}/{relative}" for _path, relative in found]
        if total > len(found):
            lines.append(
                f"[… {total - len(found)} more files match (showing the {len(found)} most recently modified): "
                "narrow the pattern or the path]"
            )
        return "\n".join(lines)

    async def grep(self, args: GrepArgs, execution: ToolExecution) -> str:
        target = self.target(execution, args.path)
        if not await anyio.Path(target.path).exists():
            raise ToolError(f"no such file or directory: {target.path}", "NOT_FOUND")
        cwd = self.ws.cwd(execution)
        shown = _shown(target.path, cwd)
        mode = args.output_mode
        around = args.around if args.around is not None else args.context or 0
        limit = args.head_limit or (GREP_MAX_MATCHES if mode == "content" else GREP_MAX_FILES)
        query = GrepQuery(
            args.pattern,
            shown,
            cwd,
            mode,
            limit,
            before=args.before if args.before is not None else around,
            after=args.after if args.after is not None else around,
            fixed_strings=args.fixed_strings,
            case_insensitive=args.case_insensitive,
            glob=args.glob,
            type=args.type,
            line_width=GREP_LINE_WIDTH,
        )
        rg = ripgrep_path()
        outcome: GrepOutcome
        if rg is not None and await anyio.Path(cwd).is_dir():
            outcome = await grep_ripgrep(rg, query, signal=execution.signal)
        else:
            query = dataclasses.replace(query, target=target.path)
            search = partial(grep_python, query, signal=execution.signal)
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
        shown_count = sum(1 for line in lines if line != "--")
        if outcome.total > shown_count or outcome.capped:
            what = {"files_with_matches": "files", "count": "files", "content": "lines"}[mode]
            more = f"{outcome.total - shown_count}{'+' if outcome.capped else ''}"
            where = ""
            if outcome.everything is not None and self.spill_root is not None:
                path = await anyio.to_thread.run_sync(
                    spill, self.spill_root, _session_of(execution), execution.call_id, "\n".join(outcome.everything)
                )
                if path is not None:
                    where = f"; all {outcome.total} are in {path}"
            note = (
                f"[… {more} more {what} (more than {shown_count} matches){where}: narrow the pattern, the path, "
                "glob or type, or raise head_limit]"
            )
            lines = [*lines, note]
        return "\n".join(lines)

    async def run_command(self, args: RunCommandArgs, execution: ToolExecution) -> Prepared:
        cwd = self.ws.cwd(execution)
        where = self.locate(execution, args.cwd) if args.cwd else None
        run_in = where.path if where is not None else cwd

        async def apply() -> str:
            if where is not None and args.cwd is not None:
                self.checked(execution, where, args.cwd)
            if args.background:
                real = where.real if where is not None else ""
                return await start_background(self.background, execution, args.command, run_in, real)
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
    """*raw* against *cwd*; the spill directories (full outputs of cut results) count as inside."""
    return resolve_path(raw, cwd, [cwd, *spill_roots()])


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
    pairs = [(e.old_string, e.new_string) for e in args.edits or ()]
    if args.edits is None and args.old_string is not None and args.new_string is not None:
        pairs = [(args.old_string, args.new_string)]
    diff = (path, "\n…\n".join(o for o, _ in pairs), "\n…\n".join(n for _, n in pairs)) if pairs else None
    return ToolCard(f"Edit {_shown(path, cwd)}", "edit", ((path, None),), diff)


def _present_list(arguments: Any, cwd: str) -> ToolCard | None:
    args = _parse(ListFilesArgs, arguments)
    if args is None:
        return None
    path = _resolve(args.path, cwd).path
    return ToolCard(f"List {_shown(path, cwd)}", "search", ((path, None),))


def _present_glob(arguments: Any, cwd: str) -> ToolCard | None:
    args = _parse(GlobArgs, arguments)
    if args is None:
        return None
    path = _resolve(args.path, cwd).path
    return ToolCard(f"Glob {args.pattern} in {_shown(path, cwd)}", "search", ((path, None),))


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
        f"numbers are not part of the file. Reads up to {READ_MAX_LINES} lines from `offset` (1-based, "
        f"`limit` lines); lines longer than {READ_LINE_WIDTH} characters are cut. The output says how many "
        "lines remain and the offset to read on from. A directory gives its listing; an image file (PNG, JPEG, "
        "GIF, WebP) comes back as the image itself (its description when you cannot see images); other binary "
        "files are refused. "
        "Read several files in one step when you need them: independent reads run at the same time."
    ),
    "write_file": (
        "Create a file or replace its whole content (parent directories are created). An existing file must "
        "have been read in this session first, and not changed since. Prefer edit_file to change part of a "
        "file; never write placeholders such as `// ... rest of the code ...`: write the complete text."
    ),
    "edit_file": (
        "Replace text in a file (read it first in this session). `old_string` must match exactly one place: "
        "include enough surrounding lines to make it unique, or set `replace_all`. A match that differs only "
        "in trailing whitespace, indentation or typographic quotes and dashes is accepted when it is unique "
        "(the result says so). For several changes to one file pass `edits: [{old_string, new_string, "
        "replace_all?}, ...]` instead: applied in order, written once, nothing written if one fails. Line "
        "endings are kept. Returns a unified diff."
    ),
    "list_files": (
        "List one directory: its subdirectories (ending in `/`) then its files, relative to the working "
        "directory. Skips what .gitignore ignores, .git, node_modules, virtualenvs and caches. To find files "
        "below it by name, use glob."
    ),
    "glob": (
        "Find files by path pattern (`src/**/*.py`, `**/test_*.ts`, `*.md`) below `path`, most recently "
        f"modified first; at most {GLOB_MAX_FILES}, with a note saying how many more matched. Skips what "
        ".gitignore ignores, hidden directories (unless the pattern names one), node_modules and caches."
    ),
    "grep": (
        "Search file contents for a regular expression (ripgrep). By default returns the names of matching "
        "files, most recently modified first; `output_mode: content` gives `path:line:text` lines (with "
        "`context`, `-A`, `-B`, `-C` lines around, as `path-line-text`), `count` gives matches per file. "
        "Narrow with `glob`, `type`, `path`; `head_limit` caps the entries. Skips hidden, binary and ignored "
        "files. Use this, not grep or rg in run_command."
    ),
    "run_command": (
        "Run a shell command (bash) in the working directory and return its combined stdout and stderr and "
        "its exit code. It has no input (stdin is empty), so interactive programs get end-of-file. It is "
        "killed after `timeout` seconds, with any processes it started; for a server or a watcher set "
        "`background` instead. Long output keeps its beginning and its end, with the whole of it saved to a file "
        "the result names. Use it for builds, tests, git and programs, not to read, search or edit files (use "
        "the dedicated tools)."
    ),
}


def build_tools(
    workspace: Workspace,
    ledger: ReadLedger | None = None,
    background: BackgroundCommands | None = None,
    *,
    fetch_private: bool = False,
    spill_root: str | None = None,
) -> list[ToolDefinition]:
    """The tool definitions over *workspace* (the sessions' read *ledger*: a fresh one when None; the
    *background* commands registry: background commands are refused without one), each with ``meta`` {kind,
    present, paths, concurrency_safe}. *fetch_private*: ``fetch_url`` may reach private addresses."""
    tools = _Tools(workspace, ledger if ledger is not None else ReadLedger(), background, spill_root)
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
            define_tool("glob", _DESCRIPTIONS["glob"], GlobArgs, tools.glob),
            "search",
            _present_glob,
            _paths_of(GlobArgs, "path"),
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
    specs.append(delete_file_spec(tools, lambda execution: tools.ws.cwd(execution), _resolve))
    specs += extra_tools(background, fetch_private=fetch_private)
    return [
        dataclasses.replace(
            tool,
            meta={
                **tool.meta,  # a tool's own keys (fetch_url's ``domain``)
                "kind": kind,
                "present": present,
                "paths": paths,
                "concurrency_safe": tool.name in CONCURRENT,
                "asks": tool.name in ASKS,
            },
        )
        for tool, kind, present, paths in specs
    ]
