"""Where the tools' blocking and heavy work runs: never on the event loop, never on the daemon's own threads.

Issue 34: a tool call must not hold the daemon or another session. Three doors:

* :func:`run_io` — blocking file I/O in a worker thread under :data:`TOOL_IO`, the tools' own capacity limiter,
  separate from anyio's default limiter that the daemon's own work (persistence, the configuration) uses: tools
  that wait on a slow disk wait among themselves, the daemon's work never waits behind them.
* :func:`run_cpu` — a CPU-heavy step (the edit matcher on a large file, an image check) in a worker thread under
  :data:`TOOL_CPU` (at most that many at once), with a deadline: past it, or when the call is cancelled, the
  caller gets :class:`~dsh.tools._errors.ToolError` (``TOOK_TOO_LONG``) at once and the thread is abandoned
  (it finishes on its own; its result is dropped).
* :func:`run_worker` — work that may need to be *stopped* (converting a hostile web page): a separate Python
  process (``python -m MODULE``) given its input on stdin, with a deadline after which it is killed, and no
  secret in its environment. Cancelling the caller kills it at once.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from typing import TypeVar

import anyio

from dsh.tools._errors import ToolError

__all__ = ["CPU_TIMEOUT", "TOOL_CPU", "TOOL_IO", "WorkerFailed", "run_cpu", "run_io", "run_worker"]

T = TypeVar("T")

TOOL_IO = anyio.CapacityLimiter(32)
"""Threads the tools' blocking file I/O may hold at once (anyio's default limiter, 40, stays the daemon's)."""
TOOL_CPU = anyio.CapacityLimiter(2)
"""CPU-heavy tool steps that may run at once (the machine's cores are shared with the loop)."""
CPU_TIMEOUT = 30.0
"""The deadline of one CPU-heavy tool step (an edit's matching, an image check)."""
_WORKER_ENV = ("PATH", "PYTHONPATH", "PYTHONHOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR")


async def run_io(func: Callable[..., T], *args: object, abandon_on_cancel: bool = False) -> T:
    """``func(*args)`` in a worker thread under :data:`TOOL_IO` (see the module docstring); *abandon_on_cancel*
    as anyio's (a walk the caller may stop waiting for)."""
    return await anyio.to_thread.run_sync(func, *args, limiter=TOOL_IO, abandon_on_cancel=abandon_on_cancel)


async def run_cpu(func: Callable[..., T], *args: object, timeout: float, what: str) -> T:  # noqa: ASYNC109
    """``func(*args)`` in a worker thread under :data:`TOOL_CPU`, abandoned after *timeout* seconds or on
    cancellation; *what* names the step in the error (``matching the edit in big.py``)."""
    try:
        with anyio.fail_after(timeout):
            return await anyio.to_thread.run_sync(func, *args, limiter=TOOL_CPU, abandon_on_cancel=True)
    except TimeoutError:
        raise ToolError(
            f"{what} took longer than {timeout:.0f} s and was stopped: try a smaller change or a smaller file",
            "TOOK_TOO_LONG",
        ) from None


class WorkerFailed(Exception):
    """A :func:`run_worker` process exited with an error, was killed by its deadline, or died."""

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


async def run_worker(module: str, data: bytes, *, timeout: float, arguments: tuple[str, ...] = ()) -> bytes:  # noqa: ASYNC109
    """Run ``python -m MODULE ARGUMENTS`` with *data* on stdin; its stdout. Killed after *timeout* seconds
    (:class:`WorkerFailed` with ``timed_out``) or when the caller is cancelled; a non-zero exit is
    :class:`WorkerFailed` with the end of its stderr."""
    env = {name: os.environ[name] for name in _WORKER_ENV if name in os.environ}
    if "PYTHONPATH" not in env:  # a checkout run without installation: the worker imports dsh from where we did
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    # Shielded: a cancel while the process is being set up (it exists, its pipes are being connected) would
    # leave it running with nobody to kill it; once it is ours, the cancel lands below and the finally kills it.
    with anyio.CancelScope(shield=True):
        process = await anyio.open_process(
            [sys.executable, "-m", module, *arguments],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
    out = bytearray()
    err = bytearray()
    try:
        with anyio.move_on_after(timeout) as scope:
            async with anyio.create_task_group() as group:

                async def feed() -> None:
                    assert process.stdin is not None
                    try:
                        await process.stdin.send(data)
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                        pass
                    finally:
                        await process.stdin.aclose()

                async def drain(stream: anyio.abc.ByteReceiveStream | None, into: bytearray) -> None:
                    if stream is not None:
                        async for chunk in stream:
                            into += chunk
                            if into is err and len(err) > 65536:
                                del err[:-65536]

                group.start_soon(feed)
                group.start_soon(drain, process.stdout, out)
                group.start_soon(drain, process.stderr, err)
            code = await process.wait()
        if scope.cancelled_caught:
            raise WorkerFailed(f"stopped after {timeout:.0f} s", timed_out=True)
    finally:
        if process.returncode is None:
            process.kill()
            with anyio.CancelScope(shield=True):
                await process.wait()
    if code != 0:
        tail = bytes(err).decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit status {code}"]
        raise WorkerFailed(tail[0])
    return bytes(out)
