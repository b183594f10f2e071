"""``dsh chat``: start the agent, connect, and hand the session to the terminal view or the piped one.

Guarantees: the agent is stopped whatever happens (see :func:`dsh.chat._agent.spawn_agent`), SIGTERM and
SIGHUP included, and so is every command it ran through ``terminal/*``; an agent that exits or answers an error
ends the chat with one line on stderr (and the tail of the agent's stderr) and status 1, never a traceback.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import IO, TYPE_CHECKING

import anyio

from dsh.chat._agent import spawn_agent
from dsh.chat._client import AcpClient
from dsh.chat._options import ChatOptions
from dsh.chat._rpc import RpcError

if TYPE_CHECKING:
    from dsh.chat._piped import PipedView
    from dsh.chat._tty import TtyView

__all__ = ["is_interactive", "run_chat"]


def is_interactive() -> bool:
    """A person is there: both stdin and stdout are terminals."""
    try:
        return sys.stdin.isatty() and sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


async def run_chat(options: ChatOptions, *, interactive: bool) -> int:
    try:
        argv = options.agent_argv()
    except ValueError as error:
        sys.stderr.write(f"dsh chat: {error}\n")
        return 2
    cwd = options.working_directory()
    if options.agent is None:  # said here: the daemon's stderr is not on the screen
        from dsh.settings import create_missing_dir

        named = options.data_dir or os.environ.get("DSH_DATA_DIR")
        if named:
            create_missing_dir(named, "--data-dir" if options.data_dir else "DSH_DATA_DIR", "dsh chat")
    trace: IO[bytes] | None = open(options.trace, "ab") if options.trace else None  # noqa: SIM115, ASYNC230 - closed below; before any task runs
    try:
        async with spawn_agent(argv, options.agent_environment(), cwd) as agent:
            if interactive:
                from dsh.chat._tty import TtyView

                view: TtyView | PipedView = TtyView(options)
            else:
                from dsh.chat._piped import PipedView

                view = PipedView(allow=options.yes)
            code = 1
            async with anyio.create_task_group() as task_group:
                client = AcpClient(agent, task_group, cwd, view, trace, options.config, careful=options.careful)
                task_group.start_soon(_stop_on_signal, task_group.cancel_scope)
                try:
                    code = await view.run(client, options.resume)
                except ConnectionError:
                    code = _failed("the agent exited", agent.stderr_tail())
                except RpcError as error:
                    code = _failed(f"the agent answered an error: {error.message}", "")
                finally:
                    client.terminals.aclose_all()
                    task_group.cancel_scope.cancel()
            return code
    except OSError as error:
        sys.stderr.write(f"dsh chat: {error}\n")
        return 1
    finally:
        if trace is not None:
            trace.close()


async def _stop_on_signal(scope: anyio.CancelScope) -> None:
    """SIGTERM or SIGHUP (the terminal closed) end the chat the orderly way: the commands it runs for the agent
    are killed and the agent is stopped, instead of the interpreter dying with them left running."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
        async for _ in signals:
            scope.cancel()
            return


def _failed(message: str, tail: str) -> int:
    from dsh.chat._sanitize import sanitize

    message, tail = sanitize(message), sanitize(tail)  # both hold the agent's words: stderr is the terminal
    sys.stderr.write(f"dsh chat: {message}\n")
    if tail.strip():
        sys.stderr.write("agent stderr (last lines):\n" + tail + "\n")
    return 1
