"""``write_file``: create a file or replace its whole content, a prepared tool (schema, body and card)."""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel, Field

from dsh._text import plural
from dsh.services.tools import Prepared, ToolCard, ToolExecution, define_prepared_tool
from dsh.tools._common import Spec, card_path, parse, paths_of, refuse_placeholder, report, shown
from dsh.tools._filetext import keep_conventions, sniff_binary
from dsh.tools._host import ToolHost
from dsh.tools._offload import run_io

__all__ = ["WriteFileArgs", "write_file_spec"]

DESCRIPTION = (
    "Create a file or replace its whole content (parent directories are created). An existing file must "
    "have been read in this session first, and not changed since. Prefer edit_file to change part of a "
    "file; never write placeholders such as `// ... rest of the code ...`: write the complete text."
)


class WriteFileArgs(BaseModel):
    path: str = Field(description="The file to create or overwrite: relative to the working directory, or absolute.")
    content: str = Field(description="The complete new content of the file.")


async def write_file(host: ToolHost, args: WriteFileArgs, execution: ToolExecution) -> Prepared:
    """Prepared: the ledger, the placeholder check and the file's conventions decide the exact new text
    before anyone is asked; apply writes exactly that."""
    target = host.locate(execution, args.path)
    old = await host.old_text(execution, target, must_exist=False)
    existed = old is not None or await run_io(os.path.lexists, target.real or target.path)
    refuse_placeholder(args.content, old, field="content")
    content = keep_conventions(args.content, old)

    async def apply() -> str:
        host.checked(execution, target, args.path)
        if not target.inside and existed:
            binary = await run_io(sniff_binary, target.real) if old is None else None
            if binary is not None:
                await host.check_binary_read(execution, target, binary)
            else:
                await host.check_read(execution, target)
        await host.unchanged_since(execution, target, old)
        await host.write(execution, target, content)
        await host.record_read(execution, target)
        report(display={"diff": {"path": target.path, "old_text": old, "new_text": content}})
        where = shown(target.path, host.cwd(execution))
        lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
        verb = "Overwrote" if existed else "Created"  # never "Created" for a file that was there
        return f"{verb} {where} ({plural(lines, 'line')}, {plural(len(content.encode('utf-8')), 'byte')})."

    return Prepared(apply, (target.path,), () if target.inside else (target.path,), (target.path, old, content))


def present_write(arguments: Any, cwd: str) -> ToolCard | None:
    args = parse(WriteFileArgs, arguments)
    if args is None:
        return None
    path = card_path(args.path, cwd).path
    return ToolCard(f"Write {shown(path, cwd)}", "edit", ((path, None),))


def write_file_spec(host: ToolHost) -> Spec:
    async def prepare(args: WriteFileArgs, execution: ToolExecution) -> Prepared:
        return await write_file(host, args, execution)

    tool = define_prepared_tool("write_file", DESCRIPTION, WriteFileArgs, prepare)
    return tool, "edit", present_write, paths_of(WriteFileArgs, "path")
