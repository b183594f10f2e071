"""Local child processes that can always be stopped: their own process group, no inherited stdin or stdout.

Guarantees of :func:`run_process`:

* The child never sees the daemon's stdin or stdout (the protocol's): stdin is ``/dev/null``, stdout and stderr
  are one pipe that we read. It runs in a new session, hence its own process group, with
  :func:`dsh.secrets.child_environment` (our environment without the provider keys and other secrets).
* Output is capped at ``output_limit`` bytes while it streams (the pipe keeps being drained so the child never
  blocks on it): ``keep="tail"`` keeps the last bytes (what a failing build or test run prints last), ``"head"``
  the first (and with ``stop_when_full`` ends the command once the cap is reached: a search that has said
  enough), ``"both"`` the first and the last half with a line saying how much was dropped between them (the
  first error and the summary). Either way ``truncated`` says so; the cut is moved to a UTF-8 character boundary.
* On timeout, on abort of *signal*, on cancellation of the calling task, and also when the command's main
  process exits by itself: the whole process group gets SIGTERM, then SIGKILL once the main process is reaped
  and the pipe is closed, or after :data:`KILL_GRACE` seconds, whichever is first. The main process is always
  reaped before this returns, and background children are not left running (a child that started its own
  session with ``setsid`` has left our group and cannot be tracked: a documented limit).
* The child does not outlive the daemon, even a ``kill -9`` of it: on Linux the group leader (the shell) is
  started with a parent-death signal (``PR_SET_PDEATHSIG`` = SIGKILL, set by ``setpriv`` or between fork and
  exec), so a shell
  running ``sleep 2; touch marker`` dies with us and never reaches ``touch``. The signal follows the *thread*
  that forked: we fork from the event loop's thread, which lives as long as the daemon (asyncio and trio both
  spawn from the loop thread; never from a worker thread). A process the shell already started in the
  background is not the leader and is orphaned instead (the kernel has no group-wide parent-death signal):
  RFC 0010 says why we accept that.
* Inside a call the sandbox contains (:func:`dsh.sandbox.active`, set by the pipeline's ``contain`` stage) the
  child is confined between fork and exec (namespaces, read-only binds, Landlock; RFC 0028) and gets the
  session's private ``TMPDIR``; if the confinement cannot be set up the command does not run (the result says
  so). Output showing the sandbox stopped a call gains the sandbox's one-line explanation. Every child's
  environment neutralises git's program-running configuration (:func:`dsh.sandbox.git_environment`).
* It returns a :class:`CommandResult` in every case but cancellation of the calling task, which it re-raises
  after the clean-up above.
"""

from __future__ import annotations

import functools
import os
import signal as signals
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import anyio

if TYPE_CHECKING:
    from anyio.abc import Process

    from dsh.kernel import CancelToken

__all__ = ["KILL_GRACE", "CommandResult", "run_process"]

_PR_SET_PDEATHSIG = 1
_SIGKILL = int(signals.SIGKILL)

KILL_GRACE = 0.3
"""Seconds between SIGTERM and SIGKILL for a process group that is being stopped."""

_DRAIN_AFTER_KILL = 1.0
"""How long we wait for the pipe to close after SIGKILL (a process that left the group may hold it)."""


@dataclass(frozen=True, slots=True)
class CommandResult:
    """What a command did (as the model and people see it). ``exit_code`` is None when it was ended by a signal (then ``signal`` names it, e.g.
    ``"SIGKILL"``) or never ran; ``truncated``: the output was cut to the limit; ``timed_out`` / ``cancelled``:
    we stopped it (the timeout elapsed / the call's signal aborted)."""

    output: str
    exit_code: int | None
    signal: str | None = None
    truncated: bool = False
    timed_out: bool = False
    cancelled: bool = False
    terminal_id: str | None = None
    """Set when an editor terminal ran the command (ACP ``terminal/create``): the card can embed it."""
    stderr: str | None = None
    """The command's stderr, kept apart from ``output`` (its first ``stderr_limit`` bytes) when the caller asked
    for it with ``stderr_limit``; None otherwise (stderr is then part of ``output``)."""


def _signal_name(number: int) -> str:
    try:
        return signals.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _decode(data: bytes, *, cut_front: bool = False, cut_back: bool = False) -> str:
    """UTF-8 text of *data*, without the broken character a cut at either end may have left."""
    if cut_front:  # skip continuation bytes of a character whose start was cut away
        start = 0
        while start < min(len(data), 4) and data[start] & 0xC0 == 0x80:
            start += 1
        data = data[start:]
    if cut_back:  # an incremental decoder keeps an incomplete final sequence back instead of replacing it
        import codecs

        return codecs.getincrementaldecoder("utf-8")(errors="replace").decode(data, final=False)
    return data.decode("utf-8", errors="replace")


def _killpg(pgid: int, number: int) -> bool:
    """Send *number* to the group; False once the group no longer exists."""
    try:
        os.killpg(pgid, number)
    except ProcessLookupError:
        return False
    except PermissionError:  # the group id was reused by someone else's processes: not ours to signal
        return False
    return True


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """libc's ``prctl`` (Linux only), looked up once, in the parent: the child must not load anything."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # pragma: no cover - a Linux without a usable libc
        return None
    return prctl


def _die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child get SIGKILL when the thread that forked it (our event loop's)
    exits, or None where that does not exist (not Linux).

    It runs in the child between fork and exec, so it does the least possible: one ``prctl`` through the libc
    handle looked up in the parent, and a check that the parent is still the one that forked (if it died
    before ``prctl`` took effect, the signal would never come: the child exits at once instead).
    """
    prctl = _prctl()
    if prctl is None:
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, _SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(127)

    return preexec


async def _stop_group(process: Process, done_reading: anyio.Event) -> None:
    """SIGTERM the group, wait (bounded) for the main process and the pipe, SIGKILL the group, reap."""
    pgid = process.pid
    if os.name != "posix":  # pragma: no cover - dsh runs on POSIX; best effort elsewhere
        if process.returncode is None:
            process.kill()
        await process.wait()
        return
    if _killpg(pgid, signals.SIGTERM):
        with anyio.move_on_after(KILL_GRACE):
            await process.wait()
            await done_reading.wait()
        _killpg(pgid, signals.SIGKILL)
    await process.wait()


_setpriv: str | None = None
_setpriv_probed = False


def _probe_setpriv() -> str | None:
    """util-linux's ``setpriv`` if it can set the parent-death signal (``--pdeathsig``, util-linux >= 2.33)."""
    import shutil
    import subprocess

    path = shutil.which("setpriv")
    if path is None:
        return None
    try:
        probe = subprocess.run(
            [path, "--pdeathsig", "KILL", "--", "true"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return path if probe.returncode == 0 else None


async def _death_wrapper() -> str | None:
    """``setpriv`` to exec the command through (probed once, in a worker thread), or None."""
    global _setpriv, _setpriv_probed
    if not _setpriv_probed and sys.platform.startswith("linux"):
        _setpriv = await anyio.to_thread.run_sync(_probe_setpriv)
        _setpriv_probed = True
    return _setpriv


def _proc_fd(fd: int) -> str | None:
    """``/proc/self/fd/<fd>`` where that names the open directory *fd* (in the child too: it inherits the
    descriptor and chdirs before the descriptors are closed), else None."""
    path = f"/proc/self/fd/{fd}"
    return path if os.path.isdir(path) else None


async def _open(
    argv: list[str], cwd: str, cwd_fd: int | None, env: dict[str, str], *, feed: bool = False, apart: bool = False
) -> Process:
    """Start *argv* in its own session (hence its own process group) with the environment *env*, stdin
    ``/dev/null`` (a pipe with *feed*), stdout and stderr one pipe (two with *apart*), dying with us (see the
    module docstring). With *cwd_fd* (an open
    directory) the child enters that directory instead of looking *cwd* up again.

    The parent-death signal is set by exec'ing the command through ``setpriv --pdeathsig KILL`` when util-linux
    has it (one extra exec, about a millisecond), else by a ``preexec_fn`` calling ``prctl`` (which makes
    :mod:`subprocess` fork instead of vfork and run Python in the child: several milliseconds more per command,
    measured by ``scripts/bench_spawn.py``). The directory is entered through ``/proc/self/fd/N`` (the child's
    own copy of the descriptor, before the descriptors are closed), else ``fchdir`` in the ``preexec_fn``.
    ``anyio.open_process`` has no ``preexec_fn``; the backend's ``open_process`` (both backends pass keyword
    arguments on to :class:`subprocess.Popen`, called from the event loop's thread) takes it.
    """
    import subprocess

    from anyio._core._eventloop import get_async_backend

    from dsh.sandbox import active, git_environment

    containment = active()
    plan = await containment.plan() if containment is not None else None
    env = git_environment(env, cwd)
    if plan is not None:
        env.update(plan.env)
    options: dict[str, Any] = {"cwd": cwd, "env": env, "start_new_session": True}
    steps: list[Callable[[], None]] = []
    if cwd_fd is not None:
        via_proc = _proc_fd(cwd_fd)
        if via_proc is not None:
            options["cwd"] = via_proc
        else:
            options["cwd"] = None
            steps.append(lambda: os.fchdir(cwd_fd))
    wrapper = None if plan is not None else await _death_wrapper()
    if plan is not None:
        steps.append(plan.preexec)  # confinement, with the parent-death signal set after the namespaces
    elif wrapper is not None:
        argv = [wrapper, "--pdeathsig", "KILL", "--", *argv]
    else:
        die = _die_with_parent()
        if die is not None:
            steps.append(die)
    if steps:

        def preexec() -> None:  # in the child, before exec and before the descriptors are closed
            for step in steps:
                step()

        options["preexec_fn"] = preexec
    return await get_async_backend().open_process(
        argv,
        stdin=subprocess.PIPE if feed else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if apart else subprocess.STDOUT,
        **options,
    )


async def run_process(
    command: str | Sequence[str],
    *,
    cwd: str,
    timeout: float,  # noqa: ASYNC109 - the command's deadline, not this coroutine's: we stop it and return
    output_limit: int,
    signal: CancelToken | None = None,
    keep: Literal["head", "tail", "both"] = "tail",
    stop_when_full: bool = False,
    cwd_fd: int | None = None,
    stdin: bytes | None = None,
    stderr_limit: int | None = None,
) -> CommandResult:
    """Run *command* (a string goes to ``bash -c`` or, without bash, ``/bin/sh -c``; a sequence is executed
    directly) in *cwd* (entered through the open directory *cwd_fd* when given: the directory that was
    checked, whatever *cwd* names now); see the module docstring for what is guaranteed.

    *stdin*: bytes the child reads on its stdin (then end of file; a child that does not read them is not an
    error), instead of ``/dev/null``. *stderr_limit*: keep stderr apart from the output, its first
    *stderr_limit* bytes in ``CommandResult.stderr`` (the rest is read and dropped, so the child never blocks)."""
    import shutil
    import subprocess

    from dsh.secrets import child_environment

    if signal is not None and signal.aborted:
        return CommandResult("", None, cancelled=True)
    if not await anyio.Path(cwd).is_dir():
        raise FileNotFoundError(f"working directory {cwd} does not exist or is not a directory")
    if isinstance(command, str):
        argv: list[str] = [shutil.which("bash") or "/bin/sh", "-c", command]
    else:
        argv = list(command)

    buffer = bytearray()
    tail = bytearray()  # keep="both": the newest bytes once the head is full
    dropped = 0
    truncated = False
    full = anyio.Event()
    done_reading = anyio.Event()
    try:
        process = await _open(
            argv, cwd, cwd_fd, child_environment(), feed=stdin is not None, apart=stderr_limit is not None
        )
    except (OSError, subprocess.SubprocessError) as exc:
        from dsh.sandbox import active

        if active() is None or isinstance(exc, FileNotFoundError):
            raise
        return CommandResult(f"blocked by the sandbox: it could not be set up ({exc}); the command did not run", None)

    async def pump() -> None:
        nonlocal truncated, dropped
        stream = process.stdout
        assert stream is not None
        half = output_limit // 2
        try:
            async for chunk in stream:
                if keep == "both":
                    if not truncated and len(buffer) + len(chunk) <= output_limit:
                        buffer.extend(chunk)
                        continue
                    if not truncated:  # the head is the first half; the rest goes to the tail
                        truncated = True
                        buffer.extend(chunk)
                        tail.extend(buffer[half:])
                        del buffer[half:]
                    else:
                        tail.extend(chunk)
                    if len(tail) > output_limit - half:
                        excess = len(tail) - (output_limit - half)
                        dropped += excess
                        del tail[:excess]
                elif keep == "tail":
                    buffer.extend(chunk)
                    if len(buffer) > output_limit:
                        del buffer[: len(buffer) - output_limit]
                        truncated = True
                elif not truncated:
                    room = output_limit - len(buffer)
                    buffer.extend(chunk[:room])
                    if len(chunk) > room:
                        truncated = True
                        if stop_when_full:
                            full.set()
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            if errors_read is None or errors_read.is_set():
                done_reading.set()
            else:
                output_read.set()

    errors = bytearray()
    errors_read = anyio.Event() if stderr_limit is not None else None
    output_read = anyio.Event()

    async def pump_errors() -> None:  # stderr apart: its head kept, the rest drained
        stream = process.stderr
        assert stream is not None and errors_read is not None and stderr_limit is not None
        try:
            async for chunk in stream:
                room = stderr_limit - len(errors)
                if room > 0:
                    errors.extend(chunk[:room])
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            errors_read.set()
            if output_read.is_set():
                done_reading.set()

    async def feed() -> None:
        sink = process.stdin
        assert sink is not None and stdin is not None
        try:
            if stdin:
                await sink.send(stdin)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass  # the child did not read it all: its business
        finally:
            with anyio.CancelScope(shield=True):
                await sink.aclose()

    timed_out = cancelled = stopped = False
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(pump)
            if errors_read is not None:
                group.start_soon(pump_errors)
            if stdin is not None:
                group.start_soon(feed)
            with anyio.CancelScope() as running:
                remove = signal.add_callback(lambda _reason: running.cancel()) if signal is not None else None
                try:
                    with anyio.move_on_after(timeout) as timer:
                        async with anyio.create_task_group() as waiters:

                            async def exited() -> None:
                                await process.wait()
                                waiters.cancel_scope.cancel()

                            async def filled() -> None:
                                await full.wait()
                                waiters.cancel_scope.cancel()

                            waiters.start_soon(exited)
                            waiters.start_soon(filled)
                    timed_out = timer.cancelled_caught
                finally:
                    if remove is not None:
                        remove()
            cancelled = running.cancelled_caught or (signal is not None and signal.aborted and not timed_out)
            with anyio.CancelScope(shield=True):
                await _stop_group(process, done_reading)
                stopped = True
                with anyio.move_on_after(_DRAIN_AFTER_KILL):
                    await done_reading.wait()
            group.cancel_scope.cancel()
    finally:
        # Reached with the task being cancelled too: the group (background children included, even when the main
        # process already exited) must still be stopped and the main process reaped.
        with anyio.CancelScope(shield=True):
            if not stopped:
                await _stop_group(process, done_reading)
            await process.aclose()

    code = process.returncode
    exit_code: int | None = code
    signal_name: str | None = None
    if code is not None and code < 0:
        exit_code, signal_name = None, _signal_name(-code)
    if keep == "both" and truncated:
        output = (
            _decode(bytes(buffer), cut_back=True)
            + f"\n[… {dropped:,} bytes of output dropped here: more than {output_limit:,} bytes in all]\n"
            + _decode(bytes(tail), cut_front=True)
        )
    else:
        output = _decode(bytes(buffer), cut_front=truncated and keep == "tail", cut_back=truncated and keep == "head")
    from dsh.sandbox import active

    containment = active()
    blocked = containment.blocked(exit_code, output) if containment is not None else None
    if blocked is not None:
        output = f"{output.rstrip()}\n{blocked}"
    return CommandResult(
        output=output,
        exit_code=exit_code,
        signal=signal_name,
        truncated=truncated,
        timed_out=timed_out,
        cancelled=cancelled,
        stderr=_decode(bytes(errors), cut_back=len(errors) >= (stderr_limit or 0))
        if stderr_limit is not None
        else None,
    )
