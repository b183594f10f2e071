"""``delete_file``: removing a file is a tool call dsh knows about (asked for, checkpointed, undone by ``/rewind``),
not an ``rm`` in a shell that nothing can take back.

Guarantees:

* prepare refuses, before anyone is asked and with nothing removed: a missing path (``NOT_FOUND``), a directory
  (``IS_DIRECTORY``), a symbolic link (``NOT_A_FILE``: the link or its target? the model says which with
  run_command); it reads the file so the approval card shows what is removed (its text as a diff to nothing; none
  for a binary file, one over 64 KiB, or a path outside the session's roots, whose content must not reach the
  editor before the user grants it).
* apply removes exactly the file prepare saw: when its bytes changed since (while the user was asked; above
  :data:`HASH_MAX`, its identity or stamp) it fails ``CHANGED_SINCE`` and removes nothing. Memory and time do
  not grow with the file: at most :data:`HASH_MAX` bytes are read. Paths outside the session's roots need the user's grant, as for edits.
* The read ledger stays honest without a step of its own: a file that is gone has no stamp, so a later
  ``write_file`` of the same path creates it afresh.
"""

from __future__ import annotations

import hashlib
import os
import stat
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from dsh._text import plural
from dsh.services.tools import Prepared, ToolCard, define_prepared_tool
from dsh.tools._errors import ToolError
from dsh.tools._offload import run_io

if TYPE_CHECKING:
    from collections.abc import Callable

    from dsh.services.tools import ToolDefinition, ToolExecution
    from dsh.tools._paths import ResolvedPath

__all__ = ["DELETE_DESCRIPTION", "DeleteFileArgs", "delete_file_spec"]

DELETE_DESCRIPTION = (
    "Delete one file (not a directory, not a symbolic link). The user sees what is removed and can undo it "
    "with /rewind; use this rather than rm in run_command, whose changes cannot be undone."
)

PREVIEW_MAX = 64 * 1024
"""The most text of a removed file the approval card shows (the file is removed whole all the same)."""


class DeleteFileArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str = Field(description="The file to delete: relative to the working directory, or absolute.")


class _Host(Protocol):
    """What the delete tool needs of the built-in tools' host (``dsh.tools._host.ToolHost``)."""

    def locate(self, execution: ToolExecution, raw: str) -> ResolvedPath: ...

    def checked(self, execution: ToolExecution, target: ResolvedPath, raw: str) -> None: ...


HASH_MAX = 16 * 1024 * 1024
"""Up to this size apply compares the file's bytes (a SHA-256) with what prepare saw; above it, its identity and
stamp (device, inode, size, modification time): a 1 GiB delete never reads the file (issue 34)."""


def _look(path: str, real: str) -> tuple[object, int, bytes]:
    """``(fingerprint, size, head)`` of the file, *head* its first :data:`PREVIEW_MAX` + 1 bytes (nothing more
    is read above :data:`HASH_MAX`); refused unless *path* is a regular file (not followed when a link)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise ToolError(f"file not found: {path}; nothing was deleted", "NOT_FOUND") from None
    if stat.S_ISLNK(info.st_mode):
        raise ToolError(
            f"{path} is a symbolic link; delete_file removes regular files only (nothing was deleted)", "NOT_A_FILE"
        )
    if stat.S_ISDIR(info.st_mode):
        raise ToolError(f"{path} is a directory; delete_file removes one file (nothing was deleted)", "IS_DIRECTORY")
    if not stat.S_ISREG(info.st_mode):
        raise ToolError(f"{path} is not a regular file; nothing was deleted", "NOT_A_FILE")
    with open(real or path, "rb") as file:
        if info.st_size > HASH_MAX:
            stamp = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
            return stamp, info.st_size, file.read(PREVIEW_MAX + 1)
        data = file.read(HASH_MAX + 1)
    return hashlib.sha256(data).digest(), len(data), data[: PREVIEW_MAX + 1]


def _text_of(data: bytes) -> str | None:
    if len(data) > PREVIEW_MAX or b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _shown(path: str, cwd: str) -> str:
    relative = os.path.relpath(path, cwd)
    return path if relative.startswith("..") else relative


def delete_file_spec(
    host: _Host, cwd_of: Callable[[ToolExecution], str], resolve: Callable[[str, str], ResolvedPath]
) -> tuple[ToolDefinition, str, Callable[[Any, str], ToolCard | None], Callable[[Any, str], list[ResolvedPath]]]:
    """``(definition, kind, presenter, paths)`` of ``delete_file`` over the built-in tools' *host*."""

    async def prepare(args: DeleteFileArgs, execution: ToolExecution) -> Prepared:
        target = host.locate(execution, args.path)
        seen, size, head = await run_io(_look, target.path, target.real)
        shown = _shown(target.path, cwd_of(execution))

        async def apply() -> str:
            host.checked(execution, target, args.path)

            def remove() -> None:
                now, _, _ = _look(target.path, target.real)
                if now != seen:
                    raise ToolError(
                        f"{shown} changed since this call was prepared (while it waited for approval); nothing "
                        "was deleted. Read the file again and decide anew.",
                        "CHANGED_SINCE",
                    )
                os.unlink(target.path)

            await run_io(remove)
            return f"Deleted {shown} ({plural(size, 'byte')})."

        # Outside the roots the card shows no text: the file's content reaches the editor only once the user
        # granted the path (as for read_file).
        text = _text_of(head) if target.inside else None
        diff = (target.path, text, "") if text is not None else None
        return Prepared(apply, (target.path,), () if target.inside else (target.path,), diff)

    def present(arguments: Any, cwd: str) -> ToolCard | None:
        try:
            args = DeleteFileArgs.model_validate(arguments)
        except Exception:
            return None
        path = resolve(args.path, cwd).path
        return ToolCard(f"Delete {_shown(path, cwd)}", "delete", ((path, None),))

    def paths(arguments: Any, cwd: str) -> list[ResolvedPath]:
        try:
            args = DeleteFileArgs.model_validate(arguments)
        except Exception:
            return []
        return [resolve(args.path, cwd)]

    tool = define_prepared_tool("delete_file", DELETE_DESCRIPTION, DeleteFileArgs, prepare)
    return tool, "delete", present, paths
