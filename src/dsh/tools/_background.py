"""Background commands: a server or a watcher the model starts, polls and stops, owned by its session.

``run_command`` with ``background: true`` starts the command here and returns at once; ``command_output``
returns what it printed since the last look; ``command_kill`` stops it. The ``background_commands`` service
(:class:`BackgroundCommands`) is the per-session registry.

Guarantees:

* A background command is a local child process under the same rules as any command
  (:mod:`dsh.tools._process`): no inherited stdin or stdout (ours is the protocol's), its own process group,
  the environment without secrets, the parent-death signal on its leader. It never runs in an editor
  terminal: it outlives the call that started it.
* It belongs to its session: it is stopped (the whole process group: SIGTERM, then SIGKILL) when the session
  is disposed (closed, deleted, its daemon shutting down) and when the plugin's scope ends; ``command_kill``
  stops one. A stopped command's entry stays readable (its last output, its exit) until the session ends.
* Output is read continuously (the child never blocks on a full pipe); at most :data:`KEEP_BYTES` of it are
  held, the oldest dropped first, and a read says how much it missed. What the model sees is budgeted like
  any other result by the tools' budget step.
* Ids are short (``bg1``, ``bg2``…), unique within the session; a command of another session is not found.
* Each command's end is told to whoever :meth:`BackgroundCommands.watch` es, once, after its output was read to
  the end of the pipe (bounded); a watcher's exception is logged, never raised. A command whose end the model
  already saw (a read after its exit, ``command_wait``, ``command_kill``) is marked ``seen``:
  :meth:`BackgroundCommands.unseen` lists the ended commands it has not (what :mod:`dsh.background` tells it).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

from dsh._log import get_logger
from dsh.tools._process import _decode, _open, _signal_name, _stop_group

if TYPE_CHECKING:
    from anyio.abc import Process

    from dsh.kernel import Context

__all__ = ["KEEP_BYTES", "BackgroundCommand", "BackgroundCommands", "Snapshot"]

log = get_logger("dsh.tools")

KEEP_BYTES = 4 * 1024 * 1024
"""Output held per background command (the newest bytes)."""

FIRST_OUTPUT_WAIT = 1.0
"""Seconds ``run_command`` waits for a background command's first output (or its exit) before returning."""


@dataclass(eq=False)
class BackgroundCommand:
    id: str
    session: str
    command: str
    cwd: str
    process: Process
    buffer: bytearray = field(default_factory=bytearray)
    received: int = 0
    """Bytes received in all (the buffer holds the last ``len(buffer)`` of them)."""
    read_to: int = 0
    """The position (in ``received`` terms) up to which the model has seen the output."""
    stopping: bool = False
    seen: bool = False
    """The model was told that this command ended (see :meth:`BackgroundCommands.unseen`)."""
    output_arrived: anyio.Event = field(default_factory=anyio.Event)
    done_reading: anyio.Event = field(default_factory=anyio.Event)
    exited: anyio.Event = field(default_factory=anyio.Event)

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def running(self) -> bool:
        return not self.exited.is_set()

    def exit_text(self) -> str:
        code = self.process.returncode
        if code is None:
            return "running"
        if code < 0:
            return f"killed by {_signal_name(-code)}"
        return f"exited with code {code}"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a command printed since the last read: ``missed`` bytes were dropped before they were read."""

    text: str
    missed: int
    running: bool
    exit_code: int | None
    signal: str | None


class BackgroundCommands:
    """The ``background_commands`` service: start, read, stop and list the background commands of each
    session (see the module docstring)."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._sessions: dict[str, dict[str, BackgroundCommand]] = {}
        self._counter: dict[str, int] = {}
        self._watchers: list[Callable[[BackgroundCommand], None]] = []

    def watch(self, watcher: Callable[[BackgroundCommand], None]) -> Callable[[], None]:
        """Call *watcher* with each command once it ended and its output was read (not for a command stopped by
        ``command_kill`` or with its session). Returns the remover."""
        self._watchers.append(watcher)
        return lambda: self._watchers.remove(watcher) if watcher in self._watchers else None

    def unseen(self, session: str) -> list[BackgroundCommand]:
        """The commands of *session* that ended without the model having seen it, in start order."""
        return [e for e in self._sessions.get(session, {}).values() if not e.running and not e.seen and not e.stopping]

    async def start(self, session: str, command: str, cwd: str, *, cwd_fd: int | None = None) -> BackgroundCommand:
        from dsh.secrets import child_environment

        argv = [shutil.which("bash") or "/bin/sh", "-c", command]
        process = await _open(argv, cwd, cwd_fd, child_environment(self._ctx.get("secret_policy")))
        number = self._counter.get(session, 0) + 1
        self._counter[session] = number
        entry = BackgroundCommand(f"bg{number}", session, command, cwd, process)
        self._sessions.setdefault(session, {})[entry.id] = entry
        self._ctx.spawn(self._pump, entry, name=f"background:{session}:{entry.id}")
        self._ctx.spawn(self._wait, entry, name=f"background-wait:{session}:{entry.id}")
        return entry

    async def _pump(self, entry: BackgroundCommand) -> None:
        stream = entry.process.stdout
        assert stream is not None
        try:
            async for chunk in stream:
                entry.buffer.extend(chunk)
                entry.received += len(chunk)
                if len(entry.buffer) > KEEP_BYTES:
                    del entry.buffer[: len(entry.buffer) - KEEP_BYTES]
                entry.output_arrived.set()
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            entry.done_reading.set()
            entry.output_arrived.set()

    async def _wait(self, entry: BackgroundCommand) -> None:
        try:
            await entry.process.wait()
        finally:
            entry.exited.set()
            entry.output_arrived.set()
        with anyio.move_on_after(0.5):  # the rest of the pipe, so a watcher reads the command's last words
            await entry.done_reading.wait()
        if entry.stopping:
            return
        for watcher in list(self._watchers):
            try:
                watcher(entry)
            except Exception:
                log.exception("background command watcher failed", command_id=entry.id, session_id=entry.session)

    async def wait_exit(self, entry: BackgroundCommand, wait: float) -> bool:
        """Wait until *entry* ended (and its output was read), at most *wait* seconds; whether it ended."""
        with anyio.move_on_after(wait):
            await entry.exited.wait()
        if entry.running:
            return False
        with anyio.move_on_after(0.5):
            await entry.done_reading.wait()
        return True

    def tail(self, entry: BackgroundCommand, limit: int) -> str:
        """The last *limit* characters (about) of what *entry* printed, whole lines where it can; no read mark moves."""
        data = bytes(entry.buffer[-limit * 4 :]) if limit else b""
        text = _decode(data, cut_front=len(data) < len(entry.buffer))
        if len(text) > limit:
            text = text[-limit:]
            newline = text.find("\n")
            if 0 <= newline < len(text) - 1:
                text = text[newline + 1 :]
        return text

    async def first_output(self, entry: BackgroundCommand, wait: float = FIRST_OUTPUT_WAIT) -> None:
        """Return once the command printed something or exited, or after *wait* seconds."""
        with anyio.move_on_after(wait):
            await entry.output_arrived.wait()
        if not entry.running:  # it exited: let the pump take the rest of the pipe
            with anyio.move_on_after(0.5):
                await entry.done_reading.wait()

    async def wait_for_output(self, entry: BackgroundCommand, wait: float) -> None:
        """Return once *entry* printed something it has not been read yet, or exited, or after *wait* seconds."""
        if entry.received > entry.read_to or not entry.running:
            return
        with anyio.move_on_after(wait):
            await entry.output_arrived.wait()

    def get(self, session: str, command_id: str) -> BackgroundCommand | None:
        return self._sessions.get(session, {}).get(command_id)

    def read(self, entry: BackgroundCommand) -> Snapshot:
        """What *entry* printed since the last read (and marks it read)."""
        start_of_buffer = entry.received - len(entry.buffer)
        missed = max(start_of_buffer - entry.read_to, 0)
        offset = max(entry.read_to - start_of_buffer, 0)
        data = bytes(entry.buffer[offset:])
        entry.read_to = entry.received
        if entry.running:  # the next wait (command_output's ``wait``) is for output after this read
            entry.output_arrived = anyio.Event()
        if not entry.running:
            entry.seen = True  # this read tells the model it ended
        code = entry.process.returncode if not entry.running else None
        exit_code = code if code is not None and code >= 0 else None
        signal = _signal_name(-code) if code is not None and code < 0 else None
        return Snapshot(_decode(data, cut_front=missed > 0 or offset > 0), missed, entry.running, exit_code, signal)

    async def kill(self, entry: BackgroundCommand) -> None:
        """Stop *entry*'s whole process group (idempotent) and wait until its leader is reaped."""
        entry.stopping = True
        entry.seen = True
        with anyio.CancelScope(shield=True):
            await _stop_group(entry.process, entry.done_reading)
            with anyio.move_on_after(1.0):
                await entry.done_reading.wait()
            entry.exited.set()

    async def kill_session(self, session: str) -> None:
        """Stop every command of *session* and forget them."""
        entries = self._sessions.pop(session, {})
        self._counter.pop(session, None)
        for entry in entries.values():
            if entry.running or entry.process.returncode is None:
                await self.kill(entry)
            else:
                _group_kill(entry.pid)  # its leader exited; what it left behind in the group goes too
            with anyio.CancelScope(shield=True):
                await entry.process.aclose()

    async def kill_all(self) -> None:
        for session in list(self._sessions):
            await self.kill_session(session)

    def list(self, session: str) -> list[BackgroundCommand]:
        return list(self._sessions.get(session, {}).values())

    def describe(self, session: str) -> str:
        """One line for ``/status``: each command's id, state and command line."""
        entries = self.list(session)
        if not entries:
            return "none"
        return "; ".join(f"{e.id} ({e.exit_text()}, pid {e.pid}): {_short(e.command)}" for e in entries)


def _short(command: str, width: int = 60) -> str:
    line = " ".join(command.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def _group_kill(pgid: int) -> None:
    import signal

    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
