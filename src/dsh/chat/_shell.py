"""``!command``: the user runs a shell command themselves, from the chat's prompt (not through the agent).

The command runs in the session's working directory, in its own process group, with the environment the chat
gives the agent's commands (provider keys and the configuration's ``secrets:`` withheld, :mod:`dsh.chat._secrets`):
its output goes to the model with the next prompt, so a key printed by ``!env`` must not be in it. stdin is
closed (the chat owns the terminal); stdout and stderr are merged.

Guarantees: a command whose caller cancels :func:`run_shell` is killed with its whole process group before the
cancellation goes on (its run keeps ``exit_code`` None); what it keeps of the output is bounded (the last
:data:`KEEP_BYTES` bytes); :func:`context_block` is one text block that says what ran, where, how it ended and
what it printed, to be sent before the user's next prompt.
"""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass

import anyio

__all__ = ["KEEP_BYTES", "ShellRun", "context_block", "run_shell"]

KEEP_BYTES = 30_000


@dataclass
class ShellRun:
    command: str
    cwd: str
    output: str = ""
    exit_code: int | None = None
    """None when the command was stopped (Ctrl+C or Esc) before it ended."""
    truncated: bool = False

    def ending(self) -> str:
        """``[exit code: N]`` (the spelling tool cards use) or ``[stopped]``."""
        return f"[exit code: {self.exit_code}]" if self.exit_code is not None else "[stopped]"


async def run_shell(run: ShellRun, env: dict[str, str]) -> None:
    """Run ``run.command`` with the user's shell (``$SHELL``, else ``/bin/sh``) and fill *run* with its output and
    exit code; when the caller cancels, the process group is killed first and ``exit_code`` stays None."""
    shell = os.environ.get("SHELL") or "/bin/sh"
    buffer = bytearray()
    process = await anyio.open_process(
        [shell, "-c", run.command],
        cwd=run.cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        async for data in process.stdout:
            buffer += data
            if len(buffer) > 2 * KEEP_BYTES:
                del buffer[: len(buffer) - KEEP_BYTES]
                run.truncated = True
        run.exit_code = await process.wait()
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            _kill_group(process.pid)
            await process.wait()
        raise
    finally:
        if len(buffer) > KEEP_BYTES:
            del buffer[: len(buffer) - KEEP_BYTES]
            run.truncated = True
        run.output = bytes(buffer).decode("utf-8", "replace")


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def context_block(runs: list[ShellRun]) -> dict[str, str]:
    """The commands the user ran since the last prompt, as one ACP text block for the model."""
    parts = []
    for run in runs:
        cut = " (output cut to its end)" if run.truncated else ""
        parts.append(
            f'<user-shell-command cwd="{run.cwd}">\n$ {run.command}\n{run.output.rstrip()}\n{run.ending()}{cut}\n'
            "</user-shell-command>"
        )
    intro = "The user ran these shell commands themselves in the chat before this message:\n"
    return {"type": "text", "text": intro + "\n".join(parts) + "\n\n"}
