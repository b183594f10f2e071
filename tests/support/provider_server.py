"""A real HTTP/1.1 server on 127.0.0.1 that plays a model provider's streaming API, scripted per test.

What a test gets, and what it guarantees:

* :class:`FakeProvider` runs a ``ThreadingHTTPServer`` in a daemon thread (one thread per client connection,
  keep-alive on). Nothing in the client is mocked: httpx opens real sockets to it.
* Replies are a queue (:meth:`FakeProvider.script`), consumed one per request in arrival order; a reply with
  ``repeat=True`` stays at the head (``500 forever``). With the queue empty, a *responder* (:meth:`FakeProvider.
  respond`: a function of the recorded request, called in arrival order under the server's lock) makes the reply,
  for runs too long to script (hundreds of steps); else an unscripted request gets a 599 whose message says so.
* A 200 reply streams its ``events`` as ``text/event-stream`` with chunked transfer encoding, one write per
  event, each after its optional ``delay``; ``disconnect_after=n`` drops the connection after *n* events
  (without the terminating chunk); ``hang=True`` keeps the response open after the events until the client
  hangs up (bounded by :data:`HANG_LIMIT`). Any other reply is a JSON (or text) body with a Content-Length.
* ``GET`` requests (web pages for ``fetch_url``) take the next reply as a plain body (its ``Content-Type``
  header may be given).
* Every request is recorded (:class:`Recorded`: path, lower-cased headers, parsed JSON body, connection number,
  arrival time); every connection's close *as the server saw it* is recorded with its ``time.monotonic()``
  (:meth:`FakeProvider.closed_at`), noticed at once while a response is streaming or waiting (``select`` on the
  socket), so a test can measure how fast a cancel reached the server.
"""

from __future__ import annotations

import json
import select
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio.to_thread

__all__ = ["HANG_LIMIT", "Event", "FakeProvider", "Recorded", "Reply", "serve"]

HANG_LIMIT = 10.0


@dataclass
class Event:
    """One server-sent event: ``data`` (a dict or list is sent as JSON; bytes are sent raw), an optional
    ``event`` name, an optional ``delay`` before it is sent."""

    data: Any
    event: str | None = None
    delay: float = 0.0

    def encode(self) -> bytes:
        if isinstance(self.data, bytes):
            return self.data  # raw bytes, sent as they are (e.g. half an event)
        data = self.data if isinstance(self.data, str) else json.dumps(self.data)
        head = f"event: {self.event}\n" if self.event else ""
        return f"{head}data: {data}\n\n".encode()


@dataclass
class Reply:
    status: int = 200
    events: list[Event] = field(default_factory=list)
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    disconnect_after: int | None = None
    hang: bool = False
    repeat: bool = False


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: Any
    connection: int
    at: float


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    provider: FakeProvider

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client resetting its connection is part of the tests (aborts); anything else is reported."""
        error = sys.exc_info()[1]
        if not isinstance(error, ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def setup(self) -> None:
        super().setup()
        # small writes (headers, then each event) go out at once: Nagle's algorithm against the client's delayed
        # ACK would otherwise hold each one ~40 ms, which long runs (hundreds of steps) multiply
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.number = self.server.provider._connected()
        self.gone = False

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.provider._closed(self.number)

    # -- client hang-up detection ---------------------------------------------------------------------------

    def _wait_for_hangup(self, seconds: float) -> bool:
        """Wait up to *seconds*; True (and the close recorded) as soon as the client closes the connection."""
        deadline = time.monotonic() + seconds
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            readable, _, _ = select.select([self.connection], [], [], left)
            if not readable:
                return False
            try:
                peeked = self.connection.recv(1, socket.MSG_PEEK)
            except OSError:
                peeked = b""
            if not peeked:
                self._hung_up()
                return True
            time.sleep(0.001)  # the client sent bytes mid-response (it never does): keep waiting

    def _hung_up(self) -> None:
        self.gone = True
        self.close_connection = True
        self.server.provider._closed(self.number)

    def _write(self, data: bytes) -> bool:
        try:
            self.wfile.write(data)
            return True
        except OSError:
            self._hung_up()
            return False

    def _chunk(self, data: bytes) -> bool:
        return self._write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    # -- requests -------------------------------------------------------------------------------------------

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body: Any = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", errors="replace")
        headers = {name.lower(): value for name, value in self.headers.items()}
        provider = self.server.provider
        reply = provider._record_and_pop(Recorded(self.path, headers, body, self.number, time.monotonic()))
        if reply.status != 200 or reply.body is not None:
            self._reply_plain(reply)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        for index, event in enumerate(reply.events):
            if reply.disconnect_after == index:
                self._drop()
                return
            if event.delay and self._wait_for_hangup(event.delay):
                return
            if not self._chunk(event.encode()):
                return
        if reply.disconnect_after is not None:
            self._drop()
            return
        if reply.hang:
            self._wait_for_hangup(HANG_LIMIT)
            return
        self._write(b"0\r\n\r\n")

    def _reply_plain(self, reply: Reply) -> None:
        """A non-streaming reply: the body (JSON unless str or bytes) with a Content-Length; a ``Content-Type``
        among the reply's headers replaces the default."""
        payload = reply.body if isinstance(reply.body, str | bytes) else json.dumps(reply.body)
        data = payload.encode() if isinstance(payload, str) else payload
        self.send_response(reply.status)
        headers = {"Content-Type": "application/json" if not isinstance(reply.body, str | bytes) else "text/plain"}
        headers.update(reply.headers)
        headers["Content-Length"] = str(len(data))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self._write(data)

    def do_GET(self) -> None:
        """A page (``fetch_url``'s tests): recorded like a POST (body None), answered by the next reply."""
        headers = {name.lower(): value for name, value in self.headers.items()}
        provider = self.server.provider
        reply = provider._record_and_pop(Recorded(self.path, headers, None, self.number, time.monotonic()))
        self._reply_plain(reply)

    def _drop(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class FakeProvider:
    """The server's state, shared with the test (all methods are thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._replies: list[Reply] = []
        self._responder: Callable[[Recorded], Reply] | None = None
        self.requests: list[Recorded] = []
        self._connections = 0
        self._closed_at: dict[int, float] = {}
        self._close_events: dict[int, threading.Event] = {}
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.provider = self
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.01,), name="fake-provider", daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self._replies.extend(replies)

    def respond(self, responder: Callable[[Recorded], Reply] | None) -> None:
        """Make the reply of every request that finds the scripted queue empty with *responder*."""
        with self._lock:
            self._responder = responder

    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]

    def _record_and_pop(self, recorded: Recorded) -> Reply:
        with self._lock:
            self.requests.append(recorded)
            self._arrived.notify_all()
            if not self._replies:
                if self._responder is not None:
                    return self._responder(recorded)
                return Reply(status=599, body={"error": {"message": "the test scripted no reply for this request"}})
            reply = self._replies[0]
            if not reply.repeat:
                self._replies.pop(0)
            return reply

    async def wait_requests(self, count: int, within: float = 5.0) -> None:
        """Return once *count* requests have arrived; fails after *within* seconds."""

        def wait() -> bool:
            with self._arrived:
                return self._arrived.wait_for(lambda: len(self.requests) >= count, within)

        assert await anyio.to_thread.run_sync(wait), f"{count} requests never arrived"

    def _connected(self) -> int:
        with self._lock:
            self._connections += 1
            self._close_events[self._connections] = threading.Event()
            return self._connections

    def _closed(self, number: int) -> None:
        with self._lock:
            if number not in self._closed_at:
                self._closed_at[number] = time.monotonic()
                self._close_events[number].set()

    def closed_at(self, number: int) -> float | None:
        with self._lock:
            return self._closed_at.get(number)

    async def wait_closed(self, number: int, within: float = 5.0) -> float:
        """When (``time.monotonic()``) the server saw connection *number* close; fails after *within* seconds."""
        with self._lock:
            event = self._close_events[number]
        assert await anyio.to_thread.run_sync(event.wait, within), f"connection {number} never closed"
        at = self.closed_at(number)
        assert at is not None
        return at

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


@contextmanager
def serve() -> Iterator[FakeProvider]:
    server = FakeProvider()
    server.start()
    try:
        yield server
    finally:
        server.stop()
