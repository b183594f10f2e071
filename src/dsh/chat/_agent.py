"""The agent the chat talks to: a subprocess speaking ACP on its stdin and stdout.

Guarantees: the agent's stdin and stdout are pipes owned by the chat; its stderr goes to an anonymous temporary
file (never to the terminal the chat draws on, never to a pipe that could fill up), whose tail
:meth:`AgentProcess.stderr_tail` reports when the agent fails. The agent leads its own process group (a Ctrl+C
in the terminal is the chat's to turn into ``session/cancel``, never a signal to the agent). On exit its stdin
is closed first (ACP's shutdown), then its group gets SIGTERM after 2 s and SIGKILL after 2 s more: the chat
never leaves it, or a process it started, behind.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import IO

import anyio
from anyio.abc import Process

__all__ = ["AgentProcess", "dsh_agent_command", "parse_agent_command", "spawn_agent"]

EXIT_GRACE = 2.0


def dsh_agent_command() -> list[str]:
    """``dsh acp`` run by this very interpreter: the daemon's bare form, which skips the typer command line
    (settings reach it through ``DSH_*`` variables, see :func:`dsh.chat._options.agent_environment`)."""
    return [sys.executable, "-m", "dsh", "acp"]


def parse_agent_command(text: str) -> list[str]:
    """``--agent "npx some-acp-agent --flag"``: split like a POSIX shell (no shell runs it)."""
    try:
        argv = shlex.split(text)
    except ValueError as error:
        raise ValueError(f"--agent: {error}") from None
    if not argv:
        raise ValueError("--agent: the command is empty")
    return argv


@dataclass
class AgentProcess:
    process: Process
    stderr: IO[bytes]
    argv: Sequence[str]

    def stderr_tail(self, lines: int = 12) -> str:
        """The last *lines* lines the agent wrote to stderr (for an error message)."""
        self.stderr.flush()
        self.stderr.seek(0, os.SEEK_END)
        size = self.stderr.tell()
        self.stderr.seek(max(0, size - 16384))
        text = self.stderr.read().decode("utf-8", "replace")
        return "\n".join(text.splitlines()[-lines:])


@asynccontextmanager
async def spawn_agent(argv: Sequence[str], env: Mapping[str, str], cwd: str) -> AsyncIterator[AgentProcess]:
    """Start the agent; on leaving, close its stdin and wait for it (terminate, then kill, if it lingers).
    A command that cannot start raises :class:`OSError` naming it."""
    with tempfile.TemporaryFile(prefix="dsh-chat-agent-") as stderr:
        try:
            process = await anyio.open_process(
                list(argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=dict(env),
                cwd=cwd,
                start_new_session=True,  # a Ctrl+C in the terminal is ours to turn into session/cancel
            )
        except OSError as error:
            raise OSError(f"cannot start the agent {shlex.join(argv)}: {error.strerror or error}") from None
        agent = AgentProcess(process, stderr, argv)
        try:
            yield agent
        finally:
            with anyio.CancelScope(shield=True):
                await _stop(process)


async def _stop(process: Process) -> None:
    if process.stdin is not None:
        try:
            await process.stdin.aclose()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with anyio.move_on_after(EXIT_GRACE):
            await process.wait()
            return
        try:
            os.killpg(process.pid, sig)  # the agent's whole group: `npx agent` leaves node behind otherwise
        except (ProcessLookupError, PermissionError):
            return
    await process.wait()
