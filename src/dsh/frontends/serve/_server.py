"""``dsh serve``: ACP over WebSocket at ``/acp``, one JSON-RPC message per text frame (RFC 0038).

Guarantees:

* Each connection is served exactly as ``dsh acp`` serves its stdio client: its own application built by
  :func:`dsh.frontends.acp.serve_client` (the same front end, policy, ordered writer and back-pressure), so one
  connection's turns, permissions, crash or slowness never reach another's. Sessions are shared through the
  store (the same data directory): a client that reconnects loads its session.
* Nothing is served before the handshake passes, in this order: the path is ``/acp`` (else 404); an ``Origin``,
  when sent, is one of ``--allow-origin`` (else 403: a web page on the user's machine cannot drive the agent);
  the bearer token matches in constant time (else 401); fewer than ``max_connections`` are open (else 503).
* A frame larger than ``max_frame`` closes that connection (1009) without reading the rest of it; a
  connection with no frame either way for ``idle_timeout`` seconds is closed (1001); a peer that stops
  answering pings is dropped; a client that stops reading stops its own model stream (the writer holds at most
  :data:`BACKLOG_LIMIT` frames), never the server.
* Without ``--delegate`` the client's ``fs`` and ``terminal`` capabilities are withdrawn from its
  ``initialize`` before the front end sees them: the agent reads and runs on the server's machine, never asks a
  remote editor for its files.
* SIGTERM / SIGINT: no new connection is accepted, every connection is shut down as a stdio client at EOF is
  (turns cancelled, prompts answered ``cancelled``, sessions flushed), then the process exits 0.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import anyio

from dsh._log import get_logger
from dsh.frontends.acp import Backlog
from dsh.frontends.serve._token import token_matches
from dsh.jsonrpc import MAX_LINE

if TYPE_CHECKING:
    from ssl import SSLContext

    from websockets.asyncio.server import ServerConnection
    from websockets.http11 import Request, Response

    from dsh.extra_plugins import ExtraPlugin
    from dsh.frontends.acp import DaemonOptions
    from dsh.jsonrpc import Oversized

__all__ = ["BACKLOG_LIMIT", "ServeOptions", "serve"]

log = get_logger("dsh.serve")

BACKLOG_LIMIT = 128
"""Frames a connection's writer holds before its model stream waits (the stdio writer's figure, RFC 0008)."""
PATH = "/acp"


@dataclass(frozen=True)
class ServeOptions:
    """What ``dsh serve`` listens on and how it bounds its clients."""

    host: str = "127.0.0.1"
    port: int = 8765
    token: str = field(default="", repr=False)
    allowed_origins: tuple[str, ...] = ()
    """``Origin`` values allowed when a client sends one (browsers always do); none by default."""
    max_frame: int = MAX_LINE
    """Largest message accepted, in bytes: :data:`dsh.jsonrpc.MAX_LINE`, the one cap of every JSON-RPC end of
    dsh (images arrive inline as base64)."""
    max_connections: int = 64
    idle_timeout: float = 3600.0
    """Seconds without a frame either way after which a connection is closed."""
    delegate: bool = False
    """Let clients' ``fs/*`` and ``terminal/*`` capabilities through (off: the agent works on this machine)."""
    tls_cert: str | None = None
    tls_key: str | None = None
    ping_interval: float = 20.0


class _Writer(Backlog):
    """A connection's one ordered writer, with the back-pressure of :class:`FlowControl` (the stdio writer's
    :class:`Backlog`): :meth:`send` never blocks nor reorders; :meth:`run` sends each frame as one text message,
    a burst of queued frames in one socket write."""

    def __init__(self, limit: int = BACKLOG_LIMIT) -> None:
        super().__init__(limit)
        self._queue: deque[bytes] = deque()
        self._wakeup = anyio.Event()
        self.last_activity = time.monotonic()

    def send(self, frame: bytes) -> None:
        if self._closed or self.broken:
            return
        self._queue.append(frame)
        self.held += 1
        self._wakeup.set()

    def close(self) -> None:
        self._closed = True
        self._wakeup.set()
        self._notify_space()

    async def run(self, ws: ServerConnection) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            while True:
                while self._queue:
                    count = len(self._queue)
                    if count == 1:
                        await ws.send(self._queue.popleft(), text=True)
                    else:
                        await _send_batch(ws, [self._queue.popleft() for _ in range(count)])
                    self.held -= count
                    self.last_activity = time.monotonic()
                    self._notify_space()
                if self._closed:
                    return
                await self._wakeup.wait()
                self._wakeup = anyio.Event()
        except ConnectionClosed:
            pass
        finally:
            self.broken = True
            self._queue.clear()
            self.held = 0
            self._notify_space()


async def _send_batch(ws: ServerConnection, frames: list[bytes]) -> None:
    """Send *frames*, each its own text message, in order, with one write to the socket (not one per frame: the
    stdio writer's batching, RFC 0008). The frames are framed by the connection's sans-I/O protocol object and
    written with nothing awaited in between, so no other frame (a ping, a close) can come between them; then the
    socket's back-pressure is awaited once."""
    from websockets.exceptions import ConnectionClosed, InvalidState

    protocol = ws.protocol
    try:
        for frame in frames:
            protocol.send_text(frame)
    except InvalidState as exc:  # closing or closed: nothing more can be sent
        raise ConnectionClosed(protocol.close_rcvd, protocol.close_sent) from exc
    data = b"".join(protocol.data_to_send())
    if data:
        ws.transport.write(data)
    await ws.drain()


class _Frames:
    """A connection's incoming messages as the front end's frames; ends when the connection closes."""

    def __init__(self, ws: ServerConnection, writer: _Writer, delegate: bool) -> None:
        self._ws = ws
        self._writer = writer
        self._delegate = delegate
        self.ended = False

    async def next(self) -> list[bytes | Oversized]:
        from websockets.exceptions import ConnectionClosed

        try:
            message = await self._ws.recv(decode=False)
        except ConnectionClosed:
            self.ended = True
            return []
        self._writer.last_activity = time.monotonic()
        frame = message.encode("utf-8") if isinstance(message, str) else message
        if not self._delegate and b'"initialize"' in frame:
            frame = _without_delegation(frame)
        return [frame]


def _without_delegation(frame: bytes) -> bytes:
    """An ``initialize`` request with the client's ``fs`` and ``terminal`` capabilities withdrawn."""
    try:
        message = json.loads(frame)
    except ValueError:
        return frame
    if not isinstance(message, dict) or message.get("method") != "initialize":
        return frame
    params = message.get("params")
    capabilities = params.get("clientCapabilities") if isinstance(params, dict) else None
    if not isinstance(capabilities, dict):
        return frame
    capabilities.pop("fs", None)
    capabilities.pop("terminal", None)
    return json.dumps(message, separators=(",", ":")).encode("utf-8")


class _Server:
    def __init__(self, options: ServeOptions, daemon: DaemonOptions, plugins: list[ExtraPlugin]) -> None:
        self.options = options
        self.daemon = daemon
        self.plugins = plugins
        self.open = 0
        self.stop = anyio.Event()
        self.sealed = False

    def check(self, connection: ServerConnection, request: Request) -> Response | None:
        """The handshake's checks (path, Origin, token, capacity); a refusal is a plain HTTP answer."""
        from http import HTTPStatus

        if request.path.split("?", 1)[0] != PATH:
            return connection.respond(HTTPStatus.NOT_FOUND, f"dsh serve speaks ACP at {PATH}\n")
        origin = request.headers.get("Origin")
        if origin is not None and origin not in self.options.allowed_origins:
            log.warning("refused a connection from a web origin", origin=origin)
            return connection.respond(HTTPStatus.FORBIDDEN, "this Origin is not allowed (see --allow-origin)\n")
        authorization = request.headers.get("Authorization") or ""
        scheme, _, presented = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token_matches(self.options.token, presented.strip()):
            return connection.respond(HTTPStatus.UNAUTHORIZED, "a valid bearer token is required\n")
        if self.open >= self.options.max_connections or self.stop.is_set():
            return connection.respond(HTTPStatus.SERVICE_UNAVAILABLE, "too many connections\n")
        return None

    async def handle(self, ws: ServerConnection) -> None:
        from dsh.frontends.acp import serve_client

        if self.open >= self.options.max_connections:  # handshakes that passed the check at once
            await ws.close(1013, "too many connections")
            return
        self.open += 1
        writer = _Writer()
        frames = _Frames(ws, writer, self.options.delegate)
        stop = anyio.Event()
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(writer.run, ws)
                group.start_soon(self._watch, ws, writer, stop)
                first, self.sealed = not self.sealed, True
                await serve_client(writer, writer.send, frames, stop, self.daemon, self.plugins, process_wide=first)
                writer.close()
                with anyio.move_on_after(1.0):
                    await ws.close(1000)
                group.cancel_scope.cancel()
        except Exception:
            log.exception("a connection failed")  # that connection only; the server carries on
        finally:
            self.open -= 1

    async def _watch(self, ws: ServerConnection, writer: _Writer, stop: anyio.Event) -> None:
        """Close the connection when idle too long, and stop it when the server stops."""
        idle = self.options.idle_timeout
        async with anyio.create_task_group() as group:

            async def on_server_stop() -> None:
                await self.stop.wait()
                stop.set()

            group.start_soon(on_server_stop)
            while True:
                left = writer.last_activity + idle - time.monotonic()
                if left <= 0:
                    log.info("closing an idle connection")
                    await ws.close(1001, "idle")
                    stop.set()
                    break
                await anyio.sleep(min(left, 30.0))
            group.cancel_scope.cancel()


def _ssl_context(options: ServeOptions) -> SSLContext | None:
    if options.tls_cert is None:
        return None
    import ssl

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(options.tls_cert, options.tls_key)
    return context


async def serve(options: ServeOptions, daemon: DaemonOptions, plugins: list[ExtraPlugin]) -> int:
    """Listen until SIGTERM / SIGINT; one line on stderr says where (and the real port when 0 was asked)."""
    from websockets.asyncio.server import serve as ws_serve

    server = _Server(options, daemon, plugins)
    ssl_context = _ssl_context(options)
    async with ws_serve(
        server.handle,
        options.host,
        options.port,
        process_request=server.check,
        max_size=options.max_frame,
        max_queue=16,
        ssl=ssl_context,
        ping_interval=options.ping_interval,
        ping_timeout=options.ping_interval,
        open_timeout=10,
        close_timeout=2,
        compression=None,
        server_header=None,
    ) as listener:
        sockets = list(listener.sockets)
        port = sockets[0].getsockname()[1] if sockets else options.port
        scheme = "wss" if ssl_context is not None else "ws"
        sys.stderr.write(f"dsh serve: listening on {scheme}://{_host_for_url(options.host)}:{port}{PATH}\n")
        sys.stderr.flush()
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                break
        log.info("shutting down")
        server.stop.set()
        listener.close(close_connections=False)
        with anyio.move_on_after(5.0):
            await listener.wait_closed()
    return 0


def _host_for_url(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def is_loopback(host: str) -> bool:
    """Whether *host* names only this machine (a name is looked up as the resolver says)."""
    import ipaddress
    import socket

    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return all(ipaddress.ip_address(info[4][0]).is_loopback for info in infos)
