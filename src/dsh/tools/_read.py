"""``read_file``: numbered lines of a text file, a directory's listing, or an image (schema, body and card)."""

from __future__ import annotations

import os
from typing import Any

import anyio
from pydantic import BaseModel, Field

from dsh._text import plural
from dsh.services.tools import ToolCard, ToolExecution, ToolOutput, define_tool
from dsh.tools._budget import READ_BUDGET
from dsh.tools._common import Spec, card_path, parse, paths_of, shown
from dsh.tools._encoding import not_utf8_message
from dsh.tools._errors import ToolError
from dsh.tools._filetext import READ_LINE_WIDTH, Binary, number_lines, sniff_binary
from dsh.tools._host import ToolHost
from dsh.tools._images import read_image
from dsh.tools._list import ListFilesArgs, list_files
from dsh.tools._notebooks import NOTEBOOK_SUFFIX, image_blocks, parse_notebook, render_notebook
from dsh.tools._offload import run_io
from dsh.tools._paths import ResolvedPath

__all__ = ["READ_MAX_CHARS", "READ_MAX_LINES", "ReadFileArgs", "read_file_spec"]

READ_MAX_LINES = 2000
READ_MAX_CHARS = READ_BUDGET
"""Characters one read returns at most, its notes included: the budget table's number (one place)."""
READ_NOTE_ROOM = 300
"""Characters kept free for the notes after the numbered lines (how many lines remain, cut lines)."""
READ_WHOLE_MAX_BYTES = 8 * 1024 * 1024
"""A file up to this size is read whole, so the result can say how many lines remain."""

DESCRIPTION = (
    "Read a text file. Lines come numbered like `cat -n` (right-aligned number, a tab, the line); the "
    f"numbers are not part of the file. Reads up to {READ_MAX_LINES} lines and at most {READ_MAX_CHARS} "
    f"characters from `offset` (1-based, `limit` lines); lines longer than {READ_LINE_WIDTH} characters are "
    "cut. The output says how many lines remain and the offset to read on from. A directory gives its listing; an image file (PNG, JPEG, "
    "GIF, WebP) comes back as the image itself (its description when you cannot see images); a notebook "
    "(.ipynb) as its cells and outputs (`offset`/`limit` count cells); other binary files are refused. "
    "Read several files in one step when you need them: independent reads run at the same time."
)


class ReadFileArgs(BaseModel):
    path: str = Field(description="The file to read: relative to the working directory, or absolute.")
    offset: int | None = Field(default=None, ge=1, description="The 1-based line to start at (default 1).")
    limit: int | None = Field(
        default=None,
        ge=1,
        description=f"How many lines to read (default and maximum {READ_MAX_LINES}; at most {READ_MAX_CHARS} "
        "characters come back per call).",
    )


def _local_size(real: str) -> int | None:
    try:
        return os.stat(real).st_size
    except OSError:
        return None


async def read_file(host: ToolHost, args: ReadFileArgs, execution: ToolExecution) -> ToolOutput:
    target = host.target(execution, args.path)
    if await anyio.Path(target.real or target.path).is_dir():
        listing = await list_files(host, ListFilesArgs(path=args.path), execution)
        return f"{shown(target.path, host.cwd(execution))} is a directory; its files:\n{listing}"
    binary = await run_io(sniff_binary, target.real or target.path)
    if binary is not None:
        return await read_binary(host, execution, target, binary)
    if target.path.lower().endswith(NOTEBOOK_SUFFIX):
        notebook = await read_notebook(host, execution, target, args)
        if notebook is not None:
            return notebook
    offset = args.offset or 1
    limit = min(args.limit or READ_MAX_LINES, READ_MAX_LINES)
    size = await run_io(_local_size, target.real or target.path)
    total: int | None = None
    if size is not None and size <= READ_WHOLE_MAX_BYTES:
        whole = await host.read_text(execution, target)
        parts = whole.split("\n")
        total = len(parts) - (1 if parts[-1] == "" else 0)
        text = "\n".join(parts[offset - 1 : offset - 1 + limit + 1])
    else:
        text = await host.read_text(execution, target, offset, limit + 1)
    await host.record_read(execution, target)
    return number_lines(text, offset, limit, max_chars=READ_MAX_CHARS - READ_NOTE_ROOM, total=total)


async def read_notebook(
    host: ToolHost, execution: ToolExecution, target: ResolvedPath, args: ReadFileArgs
) -> ToolOutput | None:
    """A notebook's cells (:mod:`._notebooks`): ``offset`` is the first cell's index, ``limit`` a number of
    cells; the images of its outputs follow the text. None when the file does not parse as a notebook (it is
    then read as the text it is, so its JSON can be mended)."""
    text = await host.read_text(execution, target)
    where = shown(target.path, host.cwd(execution))
    try:
        notebook = parse_notebook(text, where)
    except ToolError:
        return None
    await host.record_read(execution, target)
    rendered, images = render_notebook(
        notebook, where, start=args.offset or 0, limit=args.limit, max_chars=READ_MAX_CHARS - READ_NOTE_ROOM
    )
    if not images:
        return rendered
    return [{"type": "text", "text": rendered}, *image_blocks(images, where)]


async def read_binary(host: ToolHost, execution: ToolExecution, target: ResolvedPath, binary: Binary) -> ToolOutput:
    """A file that is not text: an image (PNG, JPEG, GIF, WebP by its bytes, at most 20 MB) is returned as an
    image (:mod:`._images`; a model without vision gets its description instead); anything else is refused
    with its size and type."""
    where = shown(target.path, host.cwd(execution))
    if binary.encoding is not None:
        raise ToolError(not_utf8_message(where, binary.encoding, binary.size), "NOT_TEXT")
    if target.real:  # the model now knows what the file is: a later write_file over it is not unseen
        await host.record_read(execution, target)
    if binary.mime.startswith("image/") and target.real:
        return await read_image(target.real, where, binary.mime, binary.size)
    raise ToolError(
        f"{where} is a binary file ({binary.mime}, {plural(binary.size, 'byte')}), not text: read_file "
        "shows only text files (write_file may now replace it whole, delete_file remove it)",
        "NOT_TEXT",
    )


def present_read(arguments: Any, cwd: str) -> ToolCard | None:
    args = parse(ReadFileArgs, arguments)
    if args is None:
        return None
    path = card_path(args.path, cwd).path
    return ToolCard(f"Read {shown(path, cwd)}", "read", ((path, args.offset or 1),))


def read_file_spec(host: ToolHost) -> Spec:
    async def body(args: ReadFileArgs, execution: ToolExecution) -> ToolOutput:
        return await read_file(host, args, execution)

    return (
        define_tool("read_file", DESCRIPTION, ReadFileArgs, body),
        "read",
        present_read,
        paths_of(ReadFileArgs, "path"),
    )
