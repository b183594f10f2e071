"""The state the built-in tools share over one workspace (:class:`ToolHost`) and the path and file checks
every tool body uses: resolving and refusing outside paths, reading and writing through the workspace, the read
ledger, and apply's guard that a file is still what prepare read.
"""

from __future__ import annotations

from dsh._text import plural
from dsh.services.tools import ToolExecution
from dsh.tools._background import BackgroundCommands
from dsh.tools._common import changed, dir_and_exists, session_of, shown
from dsh.tools._encoding import not_utf8_message
from dsh.tools._errors import OutsideRootsError, ToolError
from dsh.tools._filetext import Binary, sniff_binary
from dsh.tools._ledger import ReadLedger
from dsh.tools._offload import run_io
from dsh.tools._paths import ResolvedPath
from dsh.tools._safeopen import PathChangedError
from dsh.tools._workspace import Workspace

__all__ = ["ToolHost"]


class ToolHost:
    """The built-in tools' shared state over one workspace (the read ledger, the background commands, the spill
    root) and the checks their bodies share; each tool module's ``*_spec(host)`` closes over one."""

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

    def cwd(self, execution: ToolExecution) -> str:
        return self.ws.cwd(execution)

    def target(self, execution: ToolExecution, raw: str) -> ResolvedPath:
        """*raw* resolved; refused when outside the roots and not granted for this call."""
        resolved = self.ws.resolve(execution, raw)
        if (
            not resolved.inside
            and not self.ws.is_spilled(resolved.real)  # a cut result's full output
            and not self.ws.grants.is_granted(execution, resolved.real, resolved=True)
        ):
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
            raise changed(path) from None
        except FileNotFoundError:
            raise ToolError(f"file not found: {path}", "NOT_FOUND") from None
        except IsADirectoryError:
            raise ToolError(
                f"{path} is a directory, not a file: use list_files to see what it holds", "IS_DIRECTORY"
            ) from None
        except UnicodeDecodeError:
            raise ToolError(
                f"{path} is not a UTF-8 text file: read_file on it says which encoding it has and how to read and "
                "change it with run_command",
                "NOT_TEXT",
            ) from None

    async def write(self, execution: ToolExecution, target: ResolvedPath, content: str) -> None:
        try:
            await self.ws.write(execution, target.path, content, real=target.real)
        except PathChangedError:
            raise changed(target.path) from None

    def locate(self, execution: ToolExecution, raw: str) -> ResolvedPath:
        """*raw* resolved against the session's roots, not refused yet: prepare reports outside paths (the
        pipeline asks for them) and apply checks the grant (:meth:`checked`)."""
        return self.ws.resolve(execution, raw)

    def checked(self, execution: ToolExecution, target: ResolvedPath, raw: str) -> None:
        """Refuse *target* at apply time when it is outside the roots and no gate granted it for this call."""
        if not target.inside and not self.ws.grants.is_granted(execution, target.real, resolved=True):
            cwd = self.ws.cwd(execution)
            raise OutsideRootsError(
                f"path {raw!r} ({target.path}) is outside the session's directory {cwd}; tools may only use "
                "paths inside it unless the user grants access. Use a path inside the directory, or ask the "
                "user to allow this one."
            )

    async def old_text(self, execution: ToolExecution, target: ResolvedPath, *, must_exist: bool) -> str | None:
        """The current text of an existing file, None for a new one; the ledger is checked first. With
        *must_exist* (an edit) a file missing on this disk is still read through the workspace (an editor may
        hold it) and fails ``NOT_FOUND`` when nobody has it."""
        is_dir, exists = await run_io(dir_and_exists, target.real)
        if is_dir:
            raise ToolError(f"{target.path} is a directory, not a file", "IS_DIRECTORY")
        if not exists:  # a new file is not read first (through an editor, that read would report it missing)
            return await self.read_text(execution, target) if must_exist else None
        binary = await run_io(sniff_binary, target.real)
        if binary is not None and binary.encoding is not None:  # text, not UTF-8: say how, not "read it first"
            where = shown(target.path, self.ws.cwd(execution))
            raise ToolError(not_utf8_message(where, binary.encoding, binary.size), "NOT_TEXT")
        if not must_exist and binary is not None:  # not text: replaced as a whole, once the model looked at it
            if target.inside:
                await self.check_binary_read(execution, target, binary)
            return None
        if target.inside:  # an outside path is checked by apply, once a gate granted it (refused before)
            await self.check_read(execution, target)
        return await self.read_text(execution, target)

    async def check_read(self, execution: ToolExecution, target: ResolvedPath) -> None:
        where = shown(target.path, self.ws.cwd(execution))
        await run_io(self.ledger.check, session_of(execution), target.real, where)

    async def check_binary_read(self, execution: ToolExecution, target: ResolvedPath, binary: Binary) -> None:
        """The ledger's check for a binary file, whose refusal says what it is: ``exists, N bytes, binary``."""
        try:
            await self.check_read(execution, target)
        except ToolError as exc:
            if exc.code != "NOT_READ":
                raise
            where = shown(target.path, self.ws.cwd(execution))
            raise ToolError(
                f"{where} exists, {plural(binary.size, 'byte')}, binary ({binary.mime}): read it or delete it "
                "first; nothing was written",
                "NOT_READ",
            ) from None

    async def record_read(self, execution: ToolExecution, target: ResolvedPath) -> None:
        await run_io(self.ledger.record, session_of(execution), target.real)

    async def _now(self, execution: ToolExecution, target: ResolvedPath, *, edit: bool) -> str | None:
        """The file's text as apply finds it (None: missing, or a binary file that write_file replaces whole)."""
        if edit:
            try:
                return await self.read_text(execution, target)
            except ToolError as exc:
                if exc.code != "NOT_FOUND":
                    raise
                return None
        is_dir, exists = await run_io(dir_and_exists, target.real)
        if is_dir:
            raise ToolError(f"{target.path} is a directory, not a file", "IS_DIRECTORY")
        if not exists or await run_io(sniff_binary, target.real) is not None:
            return None
        try:
            return await self.read_text(execution, target)
        except ToolError as exc:
            if exc.code == "NOT_FOUND":
                return None
            raise

    async def unchanged_since(
        self, execution: ToolExecution, target: ResolvedPath, before: str | None, *, edit: bool = False
    ) -> None:
        """Apply's guard: the file is still what prepare read, else ``CHANGED_SINCE`` and nothing is written."""
        now = await self._now(execution, target, edit=edit)
        if now != before:
            where = shown(target.path, self.ws.cwd(execution))
            what = "was created" if before is None else ("was deleted" if now is None else "changed")
            raise ToolError(
                f"{where} {what} since this call was prepared (while it waited for approval); nothing was "
                "written. Read the file again and redo the change.",
                "CHANGED_SINCE",
            )
