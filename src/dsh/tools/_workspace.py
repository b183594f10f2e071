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
  :class:`IsADirectoryError`, text that is not UTF-8 :class:`UnicodeDecodeError`. File I/O runs in a worker
  thread, never on the event loop.
* ``write``: the file is created or overwritten in place (its mode is kept); missing parent directories are
  created.
* ``run``: a local child process that never inherits our stdin or stdout, in its own process group, killed
  (SIGTERM, then SIGKILL) on timeout and when the request's ``execution.signal`` aborts; it always returns a
  :class:`CommandResult` (see :mod:`dsh.tools._process`). Output keeps the *tail* when it exceeds the limit.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING

import anyio

from dsh import events as ev
from dsh.tools._paths import ResolvedPath, resolve_path
from dsh.tools._process import CommandResult, run_process

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


@dataclass(frozen=True, slots=True)
class WriteRequest:
    """Replace the content of the absolute *path* with *content* (creating the file and its directories)."""

    execution: ToolExecution
    path: str
    content: str


@dataclass(frozen=True, slots=True)
class RunRequest:
    """Run the shell *command* in the absolute directory *cwd*; stop it after *timeout* seconds; keep at most
    *output_limit* bytes of its combined stdout and stderr."""

    execution: ToolExecution
    command: str
    cwd: str
    timeout: float
    output_limit: int


def _read_sync(path: str, line: int | None, limit: int | None) -> str:
    with open(path, encoding="utf-8", newline="") as file:
        if line is None and limit is None:
            return file.read()
        start = max((line or 1) - 1, 0)
        stop = None if limit is None else start + max(limit, 0)
        return "".join(islice(file, start, stop))


def _write_sync(path: str, content: str) -> None:
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as file:
        file.write(content)


async def read_local(request: ReadRequest) -> str:
    """The innermost ``workspace/read``: the file on this machine."""
    return await anyio.to_thread.run_sync(_read_sync, request.path, request.line, request.limit)


async def write_local(request: WriteRequest) -> None:
    """The innermost ``workspace/write``: the file on this machine."""
    await anyio.to_thread.run_sync(_write_sync, request.path, request.content)


async def run_local(request: RunRequest) -> CommandResult:
    """The innermost ``workspace/run``: a local shell command (keeps the tail of long output)."""
    return await run_process(
        request.command,
        cwd=request.cwd,
        timeout=request.timeout,
        output_limit=request.output_limit,
        signal=request.execution.signal,
        keep="tail",
    )


def _absolute(path: str) -> str:
    if not os.path.isabs(path):
        raise ValueError(f"the workspace takes absolute paths, got {path!r}")
    return path


class Workspace:
    """The ``workspace`` service: where a call's session lives (its cwd and roots) and the three operations.

    ``cwd(execution)`` is the session's working directory (``agent.session.header.cwd``); a call without an
    agent, or a session without a cwd, uses the process's working directory. The roots are the cwd plus any
    directory added with :meth:`add_root` for that session (e.g. ACP ``additionalDirectories``).
    """

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._extra_roots: dict[str, list[str]] = {}

    # -- where ------------------------------------------------------------------------------------------

    def cwd(self, execution: ToolExecution) -> str:
        agent = execution.agent
        cwd = agent.session.header.cwd if agent is not None else None
        return os.path.abspath(cwd) if cwd else os.getcwd()

    def roots(self, execution: ToolExecution) -> list[str]:
        agent = execution.agent
        extra = self._extra_roots.get(agent.session.id, []) if agent is not None else []
        return [self.cwd(execution), *extra]

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

    def resolve(self, execution: ToolExecution, raw: str) -> ResolvedPath:
        """*raw* resolved against the call's cwd, ``inside`` relative to the call's roots."""
        return resolve_path(raw, self.cwd(execution), self.roots(execution))

    # -- what -------------------------------------------------------------------------------------------

    async def read(self, execution: ToolExecution, path: str, line: int | None = None, limit: int | None = None) -> str:
        """The text of the absolute *path* (``limit`` lines from 1-based ``line`` when given), through
        ``workspace/read``."""
        request = ReadRequest(execution, _absolute(path), line, limit)
        return await self._ctx.waterfall(ev.WORKSPACE_READ, request, default=read_local)

    async def write(self, execution: ToolExecution, path: str, content: str) -> None:
        """Replace the absolute *path*'s content, through ``workspace/write``."""
        request = WriteRequest(execution, _absolute(path), content)
        await self._ctx.waterfall(ev.WORKSPACE_WRITE, request, default=write_local)

    async def run(
        self,
        execution: ToolExecution,
        command: str,
        cwd: str,
        timeout: float,  # noqa: ASYNC109 - the command's deadline; the result says when it was reached
        output_limit: int,
    ) -> CommandResult:
        """Run *command* in the absolute *cwd*, through ``workspace/run``; returns a result even when the
        command timed out or the call was cancelled."""
        request = RunRequest(execution, command, _absolute(cwd), timeout, output_limit)
        return await self._ctx.waterfall(ev.WORKSPACE_RUN, request, default=run_local)
