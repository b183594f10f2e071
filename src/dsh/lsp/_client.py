"""A minimal LSP client over stdio: JSON-RPC with ``Content-Length`` framing, the few messages dsh needs.

Guarantees:

* The server runs in its own process group (``start_new_session``) with the environment of
  :func:`dsh.secrets.child_environment` (no provider keys; the daemon's watchdog token, so it dies after a
  ``kill -9`` of the daemon) and git's program-running settings neutralised (:func:`dsh.sandbox.git_environment`),
  confined by the spawn plan it is given (the sandbox of approved commands); :meth:`LspServer.kill` ends the
  whole group with ``SIGKILL`` and never raises.
* Nothing here waits unbounded: every wait takes a deadline from the caller (:meth:`LspServer.wait_diagnostics`
  returns None when none arrived in time). A server that dies, hangs or floods only makes those waits end empty.
* Requests the server sends (``workspace/configuration``, ``client/registerCapability``, progress) get a
  ``null`` (or one ``null`` per item) answer at once, so a server never blocks on the client.
* Messages larger than :data:`MAX_MESSAGE` end the connection (a flood cannot grow the daemon's memory).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dsh.sandbox import SpawnPlan

__all__ = ["MAX_MESSAGE", "Diagnostic", "LspServer"]

MAX_MESSAGE = 8 << 20
"""A message larger than this (bytes) ends the connection."""
_reaping: set[asyncio.Task[int]] = set()


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One diagnostic as dsh keeps it: the file's path, 1-based line, severity (1 error … 4 hint), message (on
    one line), source with the rule's code when the server gives one (``pyflakes``, ``Ruff F821``) and the
    server's name."""

    path: str
    line: int
    severity: int
    message: str
    source: str
    server: str

    def as_json(self) -> dict[str, Any]:
        """For a result's ``display`` (front ends): path, line, severity as a word, message, source, server."""
        label = {1: "error", 2: "warning", 3: "info", 4: "hint"}.get(self.severity, "error")
        return {
            "path": self.path,
            "line": self.line,
            "severity": label,
            "message": self.message,
            "source": self.source,
            "server": self.server,
        }

    def key(self) -> tuple[int, str, str]:
        """What makes two diagnostics "the same" across an edit: severity, message, source (not the line, which
        an edit above it moves)."""
        return (self.severity, self.message, self.source)


def one_line(message: str) -> str:
    """A server's message on one line: its non-blank lines joined with ``; `` (ruff and pyright send a message and
    a hint on separate lines; a listed diagnostic is one line)."""
    return "; ".join(line.strip() for line in message.splitlines() if line.strip())


def uri_of(path: str) -> str:
    return Path(path).as_uri()


def path_of(uri: str) -> str:
    from urllib.parse import unquote, urlparse

    return unquote(urlparse(uri).path)


@dataclass
class _Published:
    version: int | None
    items: list[Diagnostic]


@dataclass
class LspServer:
    """One running language server for one root. Create with :meth:`start`."""

    name: str
    root: str
    process: asyncio.subprocess.Process
    published: dict[str, _Published] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    """The text the server holds for each open document (what the last ``didOpen``/``didChange`` sent)."""
    _next_id: int = 0
    _pending: dict[int, asyncio.Future[Any]] = field(default_factory=dict)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _reader: asyncio.Task[None] | None = None
    dead: bool = False
    last_used: float = 0.0
    """``loop.time()`` of the last edit or check that used this server (for the idle stop)."""

    @classmethod
    async def start(
        cls,
        name: str,
        command: list[str],
        root: str,
        init_options: dict[str, Any] | None,
        plan: SpawnPlan | None = None,
    ) -> LspServer:
        """Spawn *command* in *root*, confined by *plan* (the sandbox's spawn plan: its environment entries and
        the step the child runs before exec; None: unconfined); the ``initialize`` handshake is :meth:`initialize`
        (bounded by the caller)."""
        from dsh.sandbox import git_environment
        from dsh.secrets import child_environment

        env = git_environment(child_environment(), root)
        if plan is not None:
            env.update(plan.env)
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            cwd=root,
            env=env,
            start_new_session=True,
            preexec_fn=plan.preexec if plan is not None else None,
        )
        server = cls(name, root, process)
        server._reader = asyncio.get_running_loop().create_task(server._read(), name=f"lsp:{name}")
        server._init_options = init_options
        return server

    _init_options: dict[str, Any] | None = None

    async def initialize(self) -> None:
        params = {
            "processId": os.getpid(),
            "rootUri": uri_of(self.root),
            "workspaceFolders": [{"uri": uri_of(self.root), "name": Path(self.root).name}],
            "capabilities": {
                "textDocument": {"publishDiagnostics": {"versionSupport": True}, "synchronization": {}},
                "workspace": {"workspaceFolders": True, "configuration": True},
            },
            "initializationOptions": self._init_options or {},
        }
        await self.request("initialize", params)
        await self.notify("initialized", {})

    @property
    def pid(self) -> int:
        return self.process.pid

    async def request(self, method: str, params: Any) -> Any:
        self._next_id += 1
        ident = self._next_id
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[ident] = future
        try:
            await self._send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
            return await future
        finally:
            self._pending.pop(ident, None)

    async def notify(self, method: str, params: Any) -> None:
        await self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def _send(self, message: dict[str, Any]) -> None:
        stdin = self.process.stdin
        if self.dead or stdin is None:
            raise ConnectionError(f"language server {self.name} is not running")
        body = json.dumps(message).encode()
        try:
            stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            await stdin.drain()
        except ConnectionError:  # the pipe closed under us ("Connection lost"): said as the reader says it, so
            raise ConnectionError(f"language server {self.name} exited") from None  # either end noticing reads alike

    async def open_or_change(self, path: str, text: str, language: str) -> int:
        """Tell the server *path* now holds *text*; returns the document's new version."""
        uri = uri_of(path)
        version = self.versions.get(uri)
        self.texts[uri] = text
        if version is None:
            self.versions[uri] = 1
            document = {"uri": uri, "languageId": language, "version": 1, "text": text}
            await self.notify("textDocument/didOpen", {"textDocument": document})
            return 1
        self.versions[uri] = version + 1
        await self.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": uri, "version": version + 1}, "contentChanges": [{"text": text}]},
        )
        return version + 1

    async def close(self, path: str) -> None:
        uri = uri_of(path)
        self.texts.pop(uri, None)
        if self.versions.pop(uri, None) is not None:
            self.published.pop(uri, None)
            await self.notify("textDocument/didClose", {"textDocument": {"uri": uri}})

    async def wait_diagnostics(self, path: str, version: int, after: float) -> list[Diagnostic] | None:
        """The diagnostics the server published for *path* at *version* (or after the wait began, when the
        server does not say the version), waiting while the loop's clock is before *after* (a deadline of
        ``loop.time()``); None when none arrived in time or the server died."""
        uri = uri_of(path)
        loop = asyncio.get_running_loop()
        while True:
            got = self.published.get(uri)
            if got is not None and (got.version is None or got.version >= version):
                return list(got.items)
            left = after - loop.time()
            if left <= 0 or self.dead:
                return None
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), left)

    def forget(self, path: str) -> None:
        """Drop what was published for *path* (before a change whose answer is awaited)."""
        self.published.pop(uri_of(path), None)

    async def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        try:
            while True:
                length = None
                while True:
                    line = await stdout.readline()
                    if not line:
                        return
                    if line in (b"\r\n", b"\n"):
                        break
                    name, _, value = line.decode("ascii", "replace").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                if length is None or length > MAX_MESSAGE:
                    return
                self._handle(json.loads(await stdout.readexactly(length)))
        except (ValueError, asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            self.dead = True
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(ConnectionError(f"language server {self.name} exited"))
            self._changed.set()

    def _handle(self, message: Any) -> None:
        if not isinstance(message, dict):
            return
        method = message.get("method")
        if method is None:
            future = self._pending.get(message.get("id"))  # type: ignore[arg-type]
            if future is not None and not future.done():
                if "error" in message:
                    future.set_exception(RuntimeError(str(message["error"])))
                else:
                    future.set_result(message.get("result"))
            return
        if "id" in message:  # a request of the server's: answered at once
            params = message.get("params") or {}
            items = params.get("items") if isinstance(params, dict) else None
            result: Any = (
                [None] * len(items) if method == "workspace/configuration" and isinstance(items, list) else None
            )
            asyncio.get_running_loop().create_task(self._answer(message["id"], result))
            return
        if method == "textDocument/publishDiagnostics":
            self._publish(message.get("params") or {})

    async def _answer(self, ident: Any, result: Any) -> None:
        with contextlib.suppress(Exception):
            await self._send({"jsonrpc": "2.0", "id": ident, "result": result})

    def _publish(self, params: dict[str, Any]) -> None:
        uri = params.get("uri")
        if not isinstance(uri, str):
            return
        path = path_of(uri)
        items = []
        for raw in params.get("diagnostics") or ():
            try:
                source = str(raw.get("source") or "")
                code = raw.get("code")
                if isinstance(code, (str, int)) and not isinstance(code, bool) and str(code):
                    source = f"{source} {code}".strip()
                items.append(
                    Diagnostic(
                        path=path,
                        line=int(raw["range"]["start"]["line"]) + 1,
                        severity=int(raw.get("severity") or 1),
                        message=one_line(str(raw.get("message", ""))),
                        source=source,
                        server=self.name,
                    )
                )
            except (KeyError, TypeError, ValueError):
                continue
        version = params.get("version")
        self.published[uri] = _Published(version if isinstance(version, int) else None, items)
        self._changed.set()

    def kill(self) -> None:
        """End the server's process group at once (``SIGKILL``); never raises."""
        self.dead = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        # the reader is not cancelled: it reads the pipe's end (the group is dead) and so closes it
        stdin = self.process.stdin
        if stdin is not None:
            with contextlib.suppress(Exception):
                stdin.close()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (the daemon's last moments): the subreaper or init reaps it
        _reaping.add(task := loop.create_task(self.process.wait()))
        task.add_done_callback(_reaping.discard)

    async def stop(self) -> None:
        """:meth:`kill`, then wait (bounded) until the process is reaped."""
        self.kill()
        with contextlib.suppress(TimeoutError, ProcessLookupError):
            await asyncio.wait_for(self.process.wait(), 10)
        if self._reader is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self._reader, 10)
