"""``terminal/*`` served by the chat: the agent's commands run on the user's machine, in the chat's process
tree, and their output is what the chat shows in the tool card.

Guarantees:

* A command gets the chat's environment minus the provider keys and other secrets, as when dsh runs it
  (:func:`dsh.chat._secrets.command_environment`), plus the ``env`` the agent asked for; no stdin; stdout and
  stderr merged, never the chat's own terminal.
* Output is kept up to ``outputByteLimit`` bytes (default 1 MiB), truncated from the start at a character
  boundary, as ACP says; ``truncated`` says when that happened.
* ``terminal/kill`` and ``terminal/release`` end the command's whole process group; :meth:`Terminals.aclose`
  ends every command still running when the chat exits.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import Process, TaskGroup

from dsh.chat._rpc import RpcError

__all__ = ["Terminal", "Terminals"]

DEFAULT_LIMIT = 1024 * 1024


@dataclass
class Terminal:
    terminal_id: str
    command: str
    process: Process
    limit: int
    output: bytearray = field(default_factory=bytearray)
    truncated: bool = False
    exit_code: int | None = None
    signal_name: str | None = None
    done: anyio.Event = field(default_factory=anyio.Event)

    def text(self) -> str:
        return bytes(self.output).decode("utf-8", "replace")

    def exit_status(self) -> dict[str, Any] | None:
        if not self.done.is_set():
            return None
        status: dict[str, Any] = {"exitCode": self.exit_code}
        if self.signal_name is not None:
            status["signal"] = self.signal_name
        return status

    def _append(self, data: bytes) -> None:
        self.output += data
        excess = len(self.output) - self.limit
        if excess > 0:
            while excess < len(self.output) and (self.output[excess] & 0xC0) == 0x80:
                excess += 1  # never start in the middle of a UTF-8 character
            del self.output[:excess]
            self.truncated = True


class Terminals:
    def __init__(self, task_group: TaskGroup, cwd: str, config: str | None = None) -> None:
        self._task_group = task_group
        self._cwd = cwd
        self._config = config
        self._ids = itertools.count(1)
        self.terminals: dict[str, Terminal] = {}
        self.changed: list[Any] = []
        """Callables run (with the terminal) whenever a terminal's output or state changes: the view's refresh."""

    async def handle(self, method: str, params: Any) -> dict[str, Any]:
        if not isinstance(params, dict):
            raise RpcError(-32602, "Invalid params")
        if method == "terminal/create":
            return await self._create(params)
        terminal = self.terminals.get(str(params.get("terminalId")))
        if terminal is None:
            raise RpcError(-32002, "Resource not found: no such terminal", {"terminalId": params.get("terminalId")})
        if method == "terminal/output":
            answer: dict[str, Any] = {"output": terminal.text(), "truncated": terminal.truncated}
            status = terminal.exit_status()
            if status is not None:
                answer["exitStatus"] = status
            return answer
        if method == "terminal/wait_for_exit":
            await terminal.done.wait()
            return terminal.exit_status() or {}
        if method == "terminal/kill":
            _kill(terminal)
            return {}
        if method == "terminal/release":
            _kill(terminal)
            del self.terminals[terminal.terminal_id]
            return {}
        raise RpcError(-32601, "Method not found", {"method": method})

    async def _create(self, params: dict[str, Any]) -> dict[str, Any]:
        from dsh.chat._secrets import command_environment, sealed

        await sealed(self._config)

        command = params.get("command")
        args = params.get("args") or []
        if not isinstance(command, str) or not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise RpcError(-32602, "Invalid params", {"command": "a string, and args a list of strings"})
        env = command_environment(self._config)
        for entry in params.get("env") or []:
            if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                env[entry["name"]] = str(entry.get("value", ""))
        cwd = params.get("cwd") if isinstance(params.get("cwd"), str) else self._cwd
        limit = params.get("outputByteLimit")
        limit = limit if isinstance(limit, int) and limit > 0 else DEFAULT_LIMIT
        try:
            process = await anyio.open_process(
                [command, *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=cwd,
                start_new_session=True,
            )
        except OSError as error:
            raise RpcError(-32603, f"cannot run {command}: {error.strerror or error}") from None
        terminal = Terminal(f"term-{next(self._ids)}", " ".join([command, *args]), process, limit)
        self.terminals[terminal.terminal_id] = terminal
        self._task_group.start_soon(self._pump, terminal)
        return {"terminalId": terminal.terminal_id}

    async def _pump(self, terminal: Terminal) -> None:
        stream = terminal.process.stdout
        if stream is not None:
            async for data in stream:
                terminal._append(data)
                self._notify(terminal)
        code = await terminal.process.wait()
        if code < 0:
            terminal.signal_name = signal.Signals(-code).name
        else:
            terminal.exit_code = code
        terminal.done.set()
        self._notify(terminal)

    def _notify(self, terminal: Terminal) -> None:
        for callback in self.changed:
            callback(terminal)

    def aclose_all(self) -> None:
        """End every command still running (the chat is exiting)."""
        for terminal in self.terminals.values():
            _kill(terminal)


def _kill(terminal: Terminal) -> None:
    if terminal.done.is_set():
        return
    try:
        os.killpg(terminal.process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
