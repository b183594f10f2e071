"""The workspace seam: every file read, file write and command of the built-in tools goes through here.

Three waterfall events (declared in :mod:`dsh.events`) carry one frozen request each; a front end overrides
the local behaviour by listening, e.g. the ACP front end answers ``workspace/read`` from the editor's buffers
(``fs/read_text_file``) and ``workspace/run`` with an editor terminal. Listeners take ``(request, next)``;
``await next()`` falls through to the next listener and finally to the local default below.

| event             | value          | result          | local default                                       |
|-------------------|----------------|-----------------|-----------------------------------------------------|
| workspace/read    | ReadRequest    | str             | the file's text (UTF-8, newlines untouched)         |
| workspace/write   | WriteRequest   | None            | write UTF-8 (newlines untouched), create parent dirs |
| workspace/run     | RunRequest     | CommandResult   | :func:`dsh.tools._process.run_process`              |

Guarantees of the local defaults:

* ``read``: ``line`` is 1-based, ``limit`` a number of lines (as ACP's ``fs/read_text_file``); the returned
  lines keep their line endings. A missing file raises :class:`FileNotFoundError`, a directory
  :class:`IsADirectoryError`, text that is not UTF-8 :class:`UnicodeDecodeError`, anything but a regular file
  (a FIFO, a device, a socket) :class:`~dsh.tools._regular.NotRegularFileError`, found without blocking. File
  I/O runs in a worker thread under the tools' own limiter (:func:`dsh.tools._offload.run_io`), never on the
  event loop and never taking a thread the daemon's own work needs.
* ``write``: the file is created or overwritten in place (its mode is kept); missing parent directories are
  created; an existing path that is not a regular file is refused before anything is truncated.
* ``read`` and ``write`` open what was checked: a request's ``real`` (the real path the tool's path check
  decided on; when empty, the path's real location now) is opened without following any symlink
  (:func:`dsh.tools._safeopen.open_checked`), so a symlink swapped in after the check raises
  :class:`~dsh.tools._safeopen.PathChangedError` instead of leading outside. ``run`` likewise enters
  ``real_cwd`` through a directory descriptor opened that way.
* ``run``: a local child process that never inherits our stdin or stdout, in its own process group, killed
  (SIGTERM, then SIGKILL) on timeout and when the request's ``execution.signal`` aborts; it always returns a
  :class:`CommandResult` (see :mod:`dsh.tools._process`). Output keeps its head and its tail when it exceeds the limit.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING

from dsh import events as ev
from dsh.tools._offload import run_io
from dsh.tools._paths import OutsideGrants, ResolvedPath, is_within, resolve_path
from dsh.tools._process import CommandResult, run_process
from dsh.tools._regular import open_regular
from dsh.tools._safeopen import open_checked

if TYPE_CHECKING:
    from dsh.kernel import Context
    from dsh.services.tools import ToolExecution

__all__ = [
    "CommandResult",
    "ReadRequest",
    "RunRequest",
    "Workspace",
    "WriteRequest",
    "read_local",
    "run_local",
    "write_local",
]


@dataclass(frozen=True, slots=True)
class ReadRequest:
    """Read the text of the absolute *path*: all of it, or ``limit`` lines from 1-based ``line``."""

    execution: ToolExecution
    path: str
    line: int | None = None
    limit: int | None = None
    real: str = ""
    """The real path the caller checked (what the local default opens); empty: *path*'s real location now."""


@dataclass(frozen=True, slots=True)
class WriteRequest:
    """Replace the content of the absolute *path* with *content* (creating the file and its directories)."""

    execution: ToolExecution
    path: str
    content: str
    real: str = ""
    """The real path the caller checked (what the local default opens); empty: *path*'s real location now."""


@dataclass(frozen=True, slots=True)
class RunRequest:
    """Run the shell *command* in the absolute directory *cwd*; stop it after *timeout* seconds; keep at most
    *output_limit* bytes of its combined stdout and stderr."""

    execution: ToolExecution
    command: str
    cwd: str
    timeout: float
    output_limit: int
    real_cwd: str = ""
    """The real directory the caller checked (what the local default enters); empty: *cwd* as it is."""


def _read_sync(path: str, real: str, line: int | None, limit: int | None) -> str:
    """Opens *real* (no symlinks), else *path*'s real location now."""
    fd = open_regular(real or os.path.realpath(path), os.O_RDONLY, shown=path)
    with open(fd, encoding="utf-8", newline="") as file:
        if line is None and limit is None:
            return file.read()
        start = max((line or 1) - 1, 0)
        stop = None if limit is None else start + max(limit, 0)
        return "".join(islice(file, start, stop))


def _write_sync(path: str, real: str, content: str) -> None:
    """Opens *real* (no symlinks), else *path*'s real location now; missing parents are created on the way."""
    real = real or os.path.realpath(path)
    try:
        fd = open_checked(real, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666, create_parents=True)
    except FileExistsError:  # an existing file: only a regular one is written, truncated once it is checked
        fd = open_regular(real, os.O_WRONLY, shown=path)
        os.ftruncate(fd, 0)
    with open(fd, "w", encoding="utf-8", newline="") as file:
        file.write(content)


async def read_local(request: ReadRequest) -> str:
    """The innermost ``workspace/read``: the file on this machine (the checked real path)."""
    return await run_io(_read_sync, request.path, request.real, request.line, request.limit)


async def write_local(request: WriteRequest) -> None:
    """The innermost ``workspace/write``: the file on this machine (the checked real path)."""
    await run_io(_write_sync, request.path, request.real, request.content)


def open_cwd(real: str) -> int:
    """An open descriptor of the checked directory *real* (no symlinks followed); FileNotFoundError if it is
    not a directory."""
    try:
        return open_checked(real, os.O_RDONLY | os.O_DIRECTORY)
    except (FileNotFoundError, NotADirectoryError):
        raise FileNotFoundError(f"working directory {real} does not exist or is not a directory") from None


async def run_local(request: RunRequest) -> CommandResult:
    """The innermost ``workspace/run``: a local shell command (keeps the head and the tail of long output), started in the
    checked real directory."""
    cwd_fd = await run_io(open_cwd, request.real_cwd) if request.real_cwd else None
    try:
        return await run_process(
            request.command,
            cwd=request.cwd,
            timeout=request.timeout,
            output_limit=request.output_limit,
            signal=request.execution.signal,
            keep="both",
            cwd_fd=cwd_fd,
        )
    finally:
        if cwd_fd is not None:
            os.close(cwd_fd)


def _absolute(path: str) -> str:
    if not os.path.isabs(path):
        raise ValueError(f"the workspace takes absolute paths, got {path!r}")
    return path


class Workspace:
    """The ``workspace`` service: where a call's session lives (its cwd and roots) and the three operations.

    ``cwd(execution)`` is the session's working directory (``agent.session.header.cwd``); a call without an
    agent, or a session without a cwd, uses the process's working directory. The roots are the cwd plus any
    directory added with :meth:`add_root` for that session (e.g. ACP ``additionalDirectories``).

    It also holds what lets a tool go outside those roots, for this application only (RFC 0027 §4f): the
    per-call :attr:`grants` a permission gate hands out, and the spill roots (:meth:`add_spill_root`: where cut
    results' full outputs are, readable by every session's tools). :meth:`clear` drops both; the plugin that
    provides the workspace calls it when its scope is disposed.
    """

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._extra_roots: dict[str, list[str]] = {}
        self.grants = OutsideGrants()
        """The per-call grants to use paths outside the roots (see :mod:`dsh.tools._paths`)."""
        self._spill_roots: list[str] = []

    # -- where ------------------------------------------------------------------------------------------

    def cwd(self, execution: ToolExecution) -> str:
        agent = execution.agent
        cwd = agent.session.header.cwd if agent is not None else None
        return os.path.abspath(cwd) if cwd else os.getcwd()

    def roots(self, execution: ToolExecution) -> list[str]:
        agent = execution.agent
        extra = self._extra_roots.get(agent.session.id, []) if agent is not None else []
        return [self.cwd(execution), *extra]

    def session_roots(self, session_id: str) -> tuple[str, ...]:
        """The roots *session_id* has besides its cwd (its ``additionalDirectories``), in the order added."""
        return tuple(self._extra_roots.get(session_id, ()))

    def add_root(self, session_id: str, path: str) -> Callable[[], None]:
        """Let the tools of *session_id* use the absolute directory *path* as freely as the cwd; return an
        idempotent remover."""
        root = os.path.normpath(_absolute(path))
        self._extra_roots.setdefault(session_id, []).append(root)

        def remove() -> None:
            roots = self._extra_roots.get(session_id)
            if roots is not None and root in roots:
                roots.remove(root)
                if not roots:
                    del self._extra_roots[session_id]

        return remove

    def add_spill_root(self, root: str) -> Callable[[], None]:
        """Let the tools read below *root* (its real path) as if it were the session's directory; return an
        idempotent remover."""
        real = os.path.realpath(root)
        if real not in self._spill_roots:
            self._spill_roots.append(real)

        def remove() -> None:
            if real in self._spill_roots:
                self._spill_roots.remove(real)

        return remove

    def spill_roots(self) -> tuple[str, ...]:
        """The real paths of the spill roots, in the order added."""
        return tuple(self._spill_roots)

    def is_spilled(self, real: str) -> bool:
        """Whether the real path *real* lies below a spill root."""
        return any(is_within(real, root) for root in self._spill_roots)

    def clear(self) -> None:
        """Forget every grant and spill root (the providing plugin's scope is disposed)."""
        self.grants.clear()
        self._spill_roots.clear()

    def resolve(self, execution: ToolExecution, raw: str) -> ResolvedPath:
        """*raw* resolved against the call's cwd, ``inside`` relative to the call's roots."""
        return resolve_path(raw, self.cwd(execution), self.roots(execution))

    # -- what -------------------------------------------------------------------------------------------

    async def read(
        self, execution: ToolExecution, path: str, line: int | None = None, limit: int | None = None, *, real: str = ""
    ) -> str:
        """The text of the absolute *path* (``limit`` lines from 1-based ``line`` when given), through
        ``workspace/read``; *real* is the real path the caller checked (what a local read opens)."""
        request = ReadRequest(execution, _absolute(path), line, limit, real)
        return await self._ctx.waterfall(ev.WORKSPACE_READ, request, default=read_local)

    async def write(self, execution: ToolExecution, path: str, content: str, *, real: str = "") -> None:
        """Replace the absolute *path*'s content, through ``workspace/write``; *real* as for :meth:`read`."""
        request = WriteRequest(execution, _absolute(path), content, real)
        await self._ctx.waterfall(ev.WORKSPACE_WRITE, request, default=write_local)

    async def run(
        self,
        execution: ToolExecution,
        command: str,
        cwd: str,
        timeout: float,  # noqa: ASYNC109 - the command's deadline; the result says when it was reached
        output_limit: int,
        *,
        real_cwd: str = "",
    ) -> CommandResult:
        """Run *command* in the absolute *cwd*, through ``workspace/run``; returns a result even when the
        command timed out or the call was cancelled. *real_cwd*: the real directory the caller checked."""
        request = RunRequest(execution, command, _absolute(cwd), timeout, output_limit, real_cwd)
        return await self._ctx.waterfall(ev.WORKSPACE_RUN, request, default=run_local)
