"""``dsh exec`` as a subprocess: a finished run (:func:`exec_run`), or a running one whose JSON lines a test reads
as they come and which it can interrupt (:func:`spawn_exec`).

Both run ``python -m dsh exec ARGS`` in the sandbox environment of :func:`tests.support.env.sandbox_env` (sessions
in ``tmp_path/dsh-data``), in ``tmp_path/project`` unless told otherwise; stdin is empty unless *stdin* is given.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from tests.support.env import sandbox_env

__all__ = ["ExecRun", "RunningExec", "exec_run", "json_lines", "spawn_exec"]

DEADLINE = 30.0


@dataclass
class ExecRun:
    code: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[dict[str, Any]]:
        return json_lines(self.stdout)


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every line of *text* parsed as one JSON object (a line that is not one fails the test)."""
    parsed = []
    for number, line in enumerate(text.splitlines(), start=1):
        value = json.loads(line)
        assert isinstance(value, dict), f"line {number} is not a JSON object: {line[:200]}"
        parsed.append(value)
    return parsed


def _environment(tmp_path: Path, model: str, env: Mapping[str, str | None] | None) -> dict[str, str]:
    environment = sandbox_env(tmp_path, model)
    for key, value in (env or {}).items():
        if value is None:
            environment.pop(key, None)
        else:
            environment[key] = value
    return environment


def _project(tmp_path: Path, cwd: Path | None) -> Path:
    project = cwd or tmp_path / "project"
    project.mkdir(exist_ok=True)
    return project


def exec_run(
    tmp_path: Path,
    *args: str,
    model: str = "echo",
    env: Mapping[str, str | None] | None = None,
    stdin: str = "",
    cwd: Path | None = None,
    deadline: float = DEADLINE,
) -> ExecRun:
    """Run ``dsh exec ARGS`` to its end (bounded by *deadline*, :data:`DEADLINE` unless told)."""
    done = subprocess.run(
        [sys.executable, "-m", "dsh", "exec", *args],
        env=_environment(tmp_path, model, env),
        cwd=_project(tmp_path, cwd),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=deadline,
        check=False,
    )
    return ExecRun(done.returncode, done.stdout, done.stderr)


@dataclass
class RunningExec:
    process: anyio.abc.Process
    lines: list[dict[str, Any]] = field(default_factory=list)
    _stream: BufferedByteReceiveStream | None = None

    async def next_line(self) -> dict[str, Any] | None:
        """The next JSON line of stdout (None at its end)."""
        assert self.process.stdout is not None
        if self._stream is None:
            self._stream = BufferedByteReceiveStream(self.process.stdout)
        try:
            line = await self._stream.receive_until(b"\n", 1 << 24)
        except (anyio.EndOfStream, anyio.IncompleteRead):
            return None
        value = json.loads(line)
        self.lines.append(value)
        return value

    async def wait_for(self, type_: str) -> dict[str, Any]:
        """Read lines until one of *type_* (failing at the end of stdout)."""
        while True:
            line = await self.next_line()
            assert line is not None, f"stdout ended before a {type_!r} line; got {[x['type'] for x in self.lines]}"
            if line["type"] == type_:
                return line


@asynccontextmanager
async def spawn_exec(
    tmp_path: Path, *args: str, model: str = "echo", env: Mapping[str, str | None] | None = None
) -> AsyncIterator[RunningExec]:
    """``dsh exec ARGS`` running; killed on the way out if it has not exited."""
    with (tmp_path / "exec.stderr.log").open("wb") as stderr:
        process = await anyio.open_process(
            [sys.executable, "-m", "dsh", "exec", *args],
            env=_environment(tmp_path, model, env),
            cwd=_project(tmp_path, None),
            stdin=subprocess.DEVNULL,
            stderr=stderr,
        )
    async with process:
        try:
            yield RunningExec(process)
        finally:
            if process.returncode is None:
                process.kill()
                with anyio.CancelScope(shield=True):
                    await process.wait()
