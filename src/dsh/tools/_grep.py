"""``grep``: search file contents with ripgrep (a Python fallback without it), schema, body and card."""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any, Literal

import anyio
from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from dsh.services.tools import ToolCard, ToolExecution, define_tool
from dsh.tools._budget import spill
from dsh.tools._common import TITLE_WIDTH, Spec, card_path, parse, paths_of, report, session_of, shown
from dsh.tools._errors import ToolError
from dsh.tools._host import ToolHost
from dsh.tools._offload import run_io
from dsh.tools._search import GrepOutcome, GrepQuery, grep_python, grep_ripgrep, ripgrep_path

__all__ = ["GREP_LINE_WIDTH", "GREP_MAX_FILES", "GREP_MAX_MATCHES", "GrepArgs", "grep_spec"]

GREP_MAX_MATCHES = 250
"""Lines of content a grep returns unless ``head_limit`` says otherwise."""
GREP_MAX_FILES = 100
"""File names (or counts) a grep returns unless ``head_limit`` says otherwise."""
GREP_LINE_WIDTH = 400

DESCRIPTION = (
    "Search file contents for a regular expression (ripgrep). By default returns the names of matching "
    "files, most recently modified first; `output_mode: content` gives `path:line:text` lines (with "
    "`context`, `-A`, `-B`, `-C` lines around, as `path-line-text`), `count` gives matches per file. "
    "Narrow with `glob`, `type`, `path`; `head_limit` caps the entries. Skips hidden, binary and ignored "
    "files. Use this, not grep or rg in run_command."
)


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


async def grep(host: ToolHost, args: GrepArgs, execution: ToolExecution) -> str:
    target = host.target(execution, args.path)
    if not await anyio.Path(target.path).exists():
        raise ToolError(f"no such file or directory: {target.path}", "NOT_FOUND")
    cwd = host.cwd(execution)
    base = shown(target.path, cwd)
    mode = args.output_mode
    around = args.around if args.around is not None else args.context or 0
    limit = args.head_limit or (GREP_MAX_MATCHES if mode == "content" else GREP_MAX_FILES)
    query = GrepQuery(
        args.pattern,
        base,
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
        outcome = await run_io(search, abandon_on_cancel=True)
    if outcome.error == "cancelled":
        report(is_error=True)
        return "[cancelled]"
    if outcome.error is not None:
        raise ToolError(f"grep failed: {outcome.error}", "BAD_PATTERN")
    if not outcome.lines:
        where = "the working directory" if base == "." else base
        return f"No matches for {args.pattern!r} in {where}."
    lines = outcome.lines
    shown_count = sum(1 for line in lines if line != "--")
    if outcome.total > shown_count or outcome.capped:
        what = {"files_with_matches": "files", "count": "files", "content": "lines"}[mode]
        more = f"{outcome.total - shown_count}{'+' if outcome.capped else ''}"
        where = ""
        if outcome.everything is not None and host.spill_root is not None:
            path = await run_io(
                spill, host.spill_root, session_of(execution), execution.call_id, "\n".join(outcome.everything)
            )
            if path is not None:
                where = f"; all {outcome.total} are in {path}"
        note = (
            f"[… {more} more {what} (more than {shown_count} matches){where}: narrow the pattern, the path, "
            "glob or type, or raise head_limit]"
        )
        lines = [*lines, note]
    return "\n".join(lines)


def present_grep(arguments: Any, cwd: str) -> ToolCard | None:
    args = parse(GrepArgs, arguments)
    if args is None:
        return None
    path = card_path(args.path, cwd).path
    pattern = args.pattern if len(args.pattern) <= TITLE_WIDTH // 2 else args.pattern[: TITLE_WIDTH // 2] + "…"
    title = f"Grep {pattern!r} in {shown(path, cwd)}" + (f" ({args.glob})" if args.glob else "")
    return ToolCard(title, "search", ((path, None),))


def grep_spec(host: ToolHost) -> Spec:
    async def body(args: GrepArgs, execution: ToolExecution) -> str:
        return await grep(host, args, execution)

    return define_tool("grep", DESCRIPTION, GrepArgs, body), "search", present_grep, paths_of(GrepArgs, "path")
