"""``glob``: files by path pattern, most recently modified first (schema, body and card)."""

from __future__ import annotations

from functools import partial
from typing import Any

import anyio
from pydantic import BaseModel, Field

from dsh.globs import GlobError, compile_glob
from dsh.services.tools import ToolCard, ToolExecution, define_tool
from dsh.tools._common import Spec, card_path, parse, paths_of, shown
from dsh.tools._errors import ToolError
from dsh.tools._host import ToolHost
from dsh.tools._offload import run_io
from dsh.tools._search import glob_files

__all__ = ["GLOB_MAX_FILES", "GlobArgs", "glob_spec"]

GLOB_MAX_FILES = 100

DESCRIPTION = (
    "Find files by path pattern (`src/**/*.py`, `**/test_*.ts`, `*.md`) below `path`, most recently "
    f"modified first; at most {GLOB_MAX_FILES}, with a note saying how many more matched. Skips what "
    ".gitignore ignores, hidden directories (unless the pattern names one), node_modules and caches."
)


class GlobArgs(BaseModel):
    pattern: str = Field(description='A glob over paths, e.g. "src/**/*.py", "**/test_*.py" or "*.md".')
    path: str = Field(default=".", description="The directory to search below (default: the working directory).")


async def glob(host: ToolHost, args: GlobArgs, execution: ToolExecution) -> str:
    target = host.target(execution, args.path)
    cwd = host.cwd(execution)
    base = shown(target.path, cwd)
    if not await anyio.Path(target.path).is_dir():
        raise ToolError(f"not a directory: {target.path}", "NOT_FOUND")
    try:
        compile_glob(args.pattern)  # refused before any walk: the model is told how to write it
    except GlobError as exc:
        raise ToolError(str(exc), "BAD_PATTERN") from None
    search = partial(glob_files, args.pattern, target.path, limit=GLOB_MAX_FILES, signal=execution.signal)
    found, total = await run_io(search, abandon_on_cancel=True)
    if not found:
        return f"[no files match {args.pattern!r} in {base}]"
    lines = [relative if base == "." else f"{base}/{relative}" for _path, relative in found]
    if total > len(found):
        lines.append(
            f"[… {total - len(found)} more files match (showing the {len(found)} most recently modified): "
            "narrow the pattern or the path]"
        )
    return "\n".join(lines)


def present_glob(arguments: Any, cwd: str) -> ToolCard | None:
    args = parse(GlobArgs, arguments)
    if args is None:
        return None
    path = card_path(args.path, cwd).path
    return ToolCard(f"Glob {args.pattern} in {shown(path, cwd)}", "search", ((path, None),))


def glob_spec(host: ToolHost) -> Spec:
    async def body(args: GlobArgs, execution: ToolExecution) -> str:
        return await glob(host, args, execution)

    return define_tool("glob", DESCRIPTION, GlobArgs, body), "search", present_glob, paths_of(GlobArgs, "path")
