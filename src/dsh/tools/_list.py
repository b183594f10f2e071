"""``list_files``: one directory's subdirectories then its files (schema, body and card)."""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel, Field

from dsh.services.tools import ToolCard, ToolExecution, define_tool
from dsh.tools._common import Spec, card_path, parse, paths_of, shown
from dsh.tools._errors import ToolError
from dsh.tools._host import ToolHost
from dsh.tools._offload import run_io
from dsh.tools._search import list_directory

__all__ = ["LIST_MAX_ENTRIES", "ListFilesArgs", "list_files", "list_files_spec"]

LIST_MAX_ENTRIES = 1000

DESCRIPTION = (
    "List one directory: its subdirectories (ending in `/`) then its files, relative to the working "
    "directory. Skips what .gitignore ignores, .git, node_modules, virtualenvs and caches. To find files "
    "below it by name, use glob."
)


class ListFilesArgs(BaseModel):
    path: str = Field(default=".", description="The directory to list (default: the working directory).")


async def list_files(host: ToolHost, args: ListFilesArgs, execution: ToolExecution) -> str:
    target = host.target(execution, args.path)
    cwd = host.cwd(execution)
    base = shown(target.path, cwd)

    def collect() -> tuple[list[str], int]:
        if not os.path.exists(target.path):
            raise ToolError(f"no such file or directory: {target.path}", "NOT_FOUND")
        if os.path.isfile(target.path):
            return [base], 1
        names, total = list_directory(target.path, limit=LIST_MAX_ENTRIES)
        return [name if base == "." else f"{base}/{name}" for name in names], total

    entries, total = await run_io(collect, abandon_on_cancel=True)
    if not entries:
        return f"[no files in {base}]"
    if total > len(entries):
        entries.append(f"[… {total - len(entries)} more entries: use glob with a pattern to narrow]")
    return "\n".join(entries)


def present_list(arguments: Any, cwd: str) -> ToolCard | None:
    args = parse(ListFilesArgs, arguments)
    if args is None:
        return None
    path = card_path(args.path, cwd).path
    return ToolCard(f"List {shown(path, cwd)}", "search", ((path, None),))


def list_files_spec(host: ToolHost) -> Spec:
    async def body(args: ListFilesArgs, execution: ToolExecution) -> str:
        return await list_files(host, args, execution)

    return (
        define_tool("list_files", DESCRIPTION, ListFilesArgs, body),
        "search",
        present_list,
        paths_of(ListFilesArgs, "path"),
    )
