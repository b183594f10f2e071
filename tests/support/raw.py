"""Raw-line helpers: the real ``dsh acp`` daemon in a subprocess, driven over real pipes, one byte at a time if
need be. Nothing here knows the ACP SDK: what goes in is bytes, what comes out is checked line by line.

Every line the daemon writes and this module reads is checked on arrival (:func:`check_frame`): valid UTF-8,
strict JSON (no ``NaN``/``Infinity``), one JSON-RPC 2.0 message, compact (no spaces after separators). A test
that reads through :class:`RawDaemon` therefore proves stdout purity for everything it saw.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from pathlib import Path
from typing import Any, BinaryIO

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from tests.support.env import write_script as write_path_script

__all__ = [
    "ACP_DIR",
    "MAX_LINE",
    "WAIT",
    "DaemonPool",
    "FrameError",
    "RawDaemon",
    "check_frame",
    "compact",
    "daemon_env",
    "spawn_daemon",
    "strict_loads",
    "write_script",
]

MAX_LINE = 128 * 1024 * 1024
"""The longest line the tests accept from the daemon (the daemon's own inbound limit)."""
WAIT = 30.0
"""Upper bound for any single wait on the daemon (the rules: bound everything with ``fail_after``): hang
detection, not a latency promise, so generous (10 s failed on a two-core machine kept busy by other jobs)."""
ACP_DIR = Path(__file__).resolve().parents[1] / "acp"
"""``tests/acp``: put on ``PYTHONPATH`` so ``DSH_PLUGINS=noisy_plugin:plugin`` can import the test plugins."""


class FrameError(AssertionError):
    """A line on the daemon's stdout that is not one compact, strict JSON-RPC 2.0 message."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


def strict_loads(data: bytes | str) -> Any:
    """``json.loads`` that rejects what RFC 8259 rejects and Python accepts: ``NaN``, ``Infinity``."""
    return json.loads(data, parse_constant=_reject_constant)


def compact(value: Any, *, ensure_ascii: bool = True) -> str:
    """The one canonical compact encoding (what a single-line JSON-RPC frame looks like)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=ensure_ascii, allow_nan=False)


def check_frame(line: bytes) -> dict[str, Any]:
    """Validate one stdout line (without its ``\\n``) and return the message.

    Holds when it returns: the line is UTF-8, strict JSON, an object with ``"jsonrpc": "2.0"`` that is either a
    request/notification (``method`` is a string) or a response (``id`` and exactly one of ``result``/``error``,
    the error an object with an integer ``code`` and a string ``message``), and the line is exactly the compact
    encoding of that object (no spaces after separators, no embedded newline, no trailing ``\\r``).
    """
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FrameError(f"stdout line is not UTF-8: {exc}: {line[:200]!r}") from None
    try:
        message = strict_loads(text)
    except ValueError as exc:
        raise FrameError(f"stdout line is not strict JSON: {exc}: {line[:200]!r}") from None
    if not isinstance(message, dict):
        raise FrameError(f"stdout line is not a JSON object: {line[:200]!r}")
    if message.get("jsonrpc") != "2.0":
        raise FrameError(f'stdout line lacks "jsonrpc": "2.0": {line[:200]!r}')
    if "method" in message:
        if not isinstance(message["method"], str):
            raise FrameError(f"stdout message has a non-string method: {line[:200]!r}")
    elif "id" in message:
        if ("result" in message) == ("error" in message):
            raise FrameError(f"stdout response needs exactly one of result/error: {line[:200]!r}")
        error = message.get("error")
        if "error" in message and not (
            isinstance(error, dict)
            and isinstance(error.get("code"), int)
            and not isinstance(error.get("code"), bool)
            and isinstance(error.get("message"), str)
        ):
            raise FrameError(f"stdout error is malformed: {line[:200]!r}")
    else:
        raise FrameError(f"stdout line is neither a request, a notification nor a response: {line[:200]!r}")
    if text not in (compact(message), compact(message, ensure_ascii=False)):
        raise FrameError(f"stdout line is not compact JSON: {line[:200]!r}")
    return message


def daemon_env(
    model: str = "echo", *, plugins: str | None = None, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The daemon's environment: ours without any ``DSH_*`` setting, plus *model* and *plugins*, and
    ``DSH_LSP=off`` (no language servers in unrelated tests)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("DSH_")}
    env.pop("PYTHONWARNINGS", None)
    env["DSH_MODEL"] = model
    env["DSH_LSP"] = "off"
    if plugins is not None:
        env["DSH_PLUGINS"] = plugins
        paths = [str(ACP_DIR), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
        env["PYTHONPATH"] = os.pathsep.join(paths)
    if extra:
        env.update(extra)
    return env


def write_script(directory: Path, steps: list[dict[str, Any]], name: str = "script.json") -> str:
    """Write a scripted-model script into *directory*; return the ``scripted:<path>`` model name."""
    return write_path_script(directory / name, steps)


class RawDaemon:
    """One running daemon: raw writes to its stdin, checked lines from its stdout."""

    def __init__(self, process: anyio.abc.Process, stderr_path: Path | None) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self.stderr_path = stderr_path
        self._stdin = process.stdin
        self._stdout = BufferedByteReceiveStream(process.stdout)
        self._ids = 1000
        self.lines: list[bytes] = []
        """Every stdout line read so far, in order (each already passed :func:`check_frame`)."""
        self.messages: list[dict[str, Any]] = []

    # -- writing ------------------------------------------------------------------------------------------

    async def send_bytes(self, data: bytes) -> None:
        """Write *data* exactly as given (no newline added)."""
        await self._stdin.send(data)

    async def send_line(self, data: bytes | str) -> None:
        """Write *data* followed by one ``\\n``; *data* must not contain a newline itself."""
        raw = data.encode("utf-8") if isinstance(data, str) else data
        assert b"\n" not in raw, "a raw line must not contain a newline (it would split the frame)"
        await self._stdin.send(raw + b"\n")

    async def send(self, message: Any) -> None:
        """Write *message* as one compact JSON line."""
        await self.send_line(compact(message))

    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    async def close_stdin(self) -> None:
        await self._stdin.aclose()

    # -- reading ------------------------------------------------------------------------------------------

    async def read_raw_line(self) -> bytes:
        """The next stdout line, unchecked, without its ``\\n`` (raises ``anyio.IncompleteRead`` at EOF)."""
        return await self._stdout.receive_until(b"\n", MAX_LINE)

    async def read(self) -> dict[str, Any]:
        """The next stdout message (checked by :func:`check_frame`)."""
        line = await self.read_raw_line()
        message = check_frame(line)
        self.lines.append(line)
        self.messages.append(message)
        return message

    async def read_response(self) -> dict[str, Any]:
        """The very next line, which must be a response (not a notification)."""
        message = await self.read()
        assert "method" not in message, f"expected a response, got {message!r:.300}"
        return message

    async def read_until_eof(self) -> list[dict[str, Any]]:
        """Every remaining message up to the end of stdout (each checked; a final unterminated line is an error)."""
        rest: list[dict[str, Any]] = []
        while True:
            try:
                line = await self.read_raw_line()
            except (anyio.IncompleteRead, anyio.EndOfStream):
                leftover = bytes(self._stdout.buffer)
                if leftover:
                    raise FrameError(f"stdout ended inside a line (no newline): {leftover[:200]!r}") from None
                break
            message = check_frame(line)
            self.lines.append(line)
            self.messages.append(message)
            rest.append(message)
        return rest

    async def collect(self, request_id: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Read until the response to *request_id*; return it and the notifications read on the way.

        Any other response on the way is an error (the tests that use this have one request in flight).
        """
        notifications: list[dict[str, Any]] = []
        while True:
            message = await self.read()
            if "method" in message:
                notifications.append(message)
                continue
            assert compact(message.get("id")) == compact(request_id), (
                f"expected the response to {request_id!r}, got {message!r:.300}"
            )
            return message, notifications

    # -- requests -----------------------------------------------------------------------------------------

    async def request(self, method: str, params: Any = None, *, request_id: Any = None) -> dict[str, Any]:
        """Send one request and return its response (notifications on the way are kept in ``messages``)."""
        rid = self.next_id() if request_id is None else request_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        response, _ = await self.collect(rid)
        return response

    async def initialize(self, protocol_version: Any = 1) -> dict[str, Any]:
        """``initialize``; asserts it succeeded and returns its result."""
        response = await self.request(
            "initialize", {"protocolVersion": protocol_version, "clientCapabilities": {}, "clientInfo": _CLIENT}
        )
        assert "result" in response, f"initialize failed: {response!r:.300}"
        result: dict[str, Any] = response["result"]
        return result

    async def assert_serving(self, *, strict: bool = False) -> None:
        """A fresh ``initialize`` is answered, and no other response came before its answer.

        *strict*: its answer is the very next line (not even a ``session/update`` before it), which proves that
        whatever was sent before it got no answer at all. Otherwise ``session/update`` notifications still in
        flight (a session's own updates, not answers to anything) may come first.
        """
        rid = self.next_id()
        await self.send(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "method": "initialize",
                "params": {"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": _CLIENT},
            }
        )
        response = await self.read()
        while not strict and response.get("method") == "session/update":
            response = await self.read()
        assert response.get("id") == rid and "result" in response, (
            f"the next line should answer initialize {rid}, got {response!r:.300}"
        )
        assert response["result"]["protocolVersion"] == 1

    async def new_session(self, cwd: str | None = None) -> str:
        response = await self.request("session/new", {"cwd": cwd or os.getcwd(), "mcpServers": []})
        assert "result" in response, f"session/new failed: {response!r:.300}"
        session_id = response["result"]["sessionId"]
        assert isinstance(session_id, str)
        await self.read_announcement(session_id)
        return session_id

    async def read_announcement(self, session_id: str) -> dict[str, Any]:
        """The ``available_commands_update`` that follows a new/load/resume answer: always the very next line."""
        message = await self.read()
        update = message.get("params", {}).get("update", {}) if message.get("method") == "session/update" else {}
        assert update.get("sessionUpdate") == "available_commands_update", (
            f"expected the commands announcement right after the answer, got {message!r:.300}"
        )
        assert message["params"]["sessionId"] == session_id
        return message

    async def prompt(
        self, session_id: str, blocks: list[dict[str, Any]] | str
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """One ``session/prompt``; returns its response and the ``session/update`` params streamed before it."""
        prompt = [{"type": "text", "text": blocks}] if isinstance(blocks, str) else blocks
        rid = self.next_id()
        await self.send(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "method": "session/prompt",
                "params": {"sessionId": session_id, "prompt": prompt},
            }
        )
        response, notifications = await self.collect(rid)
        updates = []
        for note in notifications:
            assert note["method"] == "session/update", f"unexpected notification {note!r:.300}"
            assert note["params"]["sessionId"] == session_id
            updates.append(note["params"]["update"])
        return response, updates

    # -- lifetime -----------------------------------------------------------------------------------------

    def signal(self, signum: int) -> None:
        self.process.send_signal(signal.Signals(signum))

    async def wait_exit(self) -> tuple[int, float]:
        """Wait for the process to exit; return its code and how long that took from the call."""
        start = time.monotonic()
        code = await self.process.wait()
        return code, time.monotonic() - start

    def stderr_text(self) -> str:
        if self.stderr_path is None:
            return ""
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")


_CLIENT = {"name": "dsh-raw-tests", "version": "0"}


def _open_for_child(path: Path) -> BinaryIO:
    return path.open("wb")


@asynccontextmanager
async def spawn_daemon(
    *,
    model: str = "echo",
    plugins: str | None = None,
    stderr_path: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> AsyncIterator[RawDaemon]:
    """``python -m dsh acp`` with pipes on stdin/stdout and stderr to *stderr_path* (or ``/dev/null``).

    The daemon's data directory is a fresh temporary directory (removed afterwards), so no test reads or
    leaves sessions in the user's data directory.

    On leaving: stdin is closed and the process gets a moment to exit on its own, then it is killed.
    """
    data_dir = tempfile.mkdtemp(prefix="dsh-raw-data-")
    isolation = {"DSH_DATA_DIR": data_dir, "XDG_DATA_HOME": data_dir, **(env or {})}
    stderr_file = _open_for_child(stderr_path) if stderr_path is not None else None
    try:
        process = await anyio.open_process(
            [sys.executable, "-m", "dsh", "acp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr_file if stderr_file is not None else subprocess.DEVNULL,
            env=daemon_env(model, plugins=plugins, extra=isolation),
        )
    except BaseException:
        shutil.rmtree(data_dir, ignore_errors=True)
        raise
    finally:
        if stderr_file is not None:
            stderr_file.close()  # the child has its own copy of the fd
    daemon = RawDaemon(process, stderr_path)
    try:
        yield daemon
    finally:
        with anyio.CancelScope(shield=True):
            with suppress(Exception):
                await daemon.close_stdin()
            with anyio.move_on_after(3):
                await process.wait()
            if process.returncode is None:
                with suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
            await process.aclose()
            shutil.rmtree(data_dir, ignore_errors=True)


class DaemonPool:
    """One daemon reused by many tests, replaced whenever a test leaves it in doubt.

    A test borrows the current daemon; on release the daemon must answer a fresh ``initialize`` within 2 s with
    no other response before it (so it is alive and no answer is left unread), else it is killed and the next
    test gets a new one. Spawning costs ~0.3 s; reuse keeps a hundred raw cases within a few seconds.
    """

    def __init__(self, directory: Path, **spawn: Any) -> None:
        self._directory = directory
        self._spawn = spawn
        self._stack: AsyncExitStack | None = None
        self._current: RawDaemon | None = None
        self._count = 0

    async def borrow(self) -> RawDaemon:
        if self._current is not None and self._current.process.returncode is None:
            return self._current
        await self.aclose()
        self._count += 1
        stack = AsyncExitStack()
        stderr_path = self._directory / f"stderr-{self._count}.log"
        self._current = await stack.enter_async_context(spawn_daemon(stderr_path=stderr_path, **self._spawn))
        self._stack = stack
        return self._current

    async def release(self, daemon: RawDaemon) -> None:
        healthy = False
        if daemon is self._current and daemon.process.returncode is None:
            try:
                with anyio.fail_after(2):
                    await daemon.assert_serving()
                healthy = True
            except Exception:
                healthy = False
        if not healthy:
            await self.aclose()

    async def aclose(self) -> None:
        stack, self._stack, self._current = self._stack, None, None
        if stack is not None:
            await stack.aclose()
