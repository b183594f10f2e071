"""The client end of one JSON-RPC 2.0 connection: newline-delimited frames over a pair of byte streams.

Guarantees:

* Every frame written is one compact JSON object and one ``\\n``; writes never interleave (one lock).
* The reader never awaits a handler inline: each incoming request runs in its own task, so an agent's
  ``session/request_permission`` is answered while our ``session/prompt`` is still pending, and every incoming
  request gets exactly one answer (a handler's :class:`RpcError` as that error, anything else as -32603 without
  the exception's text).
* Notifications are handled inline, in arrival order (the chat's view depends on update order).
* When the agent's stdout ends, every pending request fails with :class:`ConnectionError`; nothing waits forever.
* Lines are framed by :mod:`dsh.jsonrpc` (the daemon's framer and cap, :data:`~dsh.jsonrpc.MAX_LINE`). A line
  over the cap is dropped as it arrives and reported the one way every end of dsh reports it
  (:func:`~dsh.jsonrpc.too_large`): an answer to one of our requests fails that request with it, anything else is
  answered with it and ``id: null``; reading goes on. A line that is not JSON is logged and skipped.

No ACP knowledge lives here; :mod:`dsh.chat._client` gives the methods their meaning.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from typing import IO, Any

import anyio
import orjson
from anyio.abc import ByteReceiveStream, ByteSendStream, TaskGroup

from dsh._log import get_logger
from dsh.jsonrpc import INTERNAL_ERROR, MAX_LINE, Oversized, RpcError, read_lines, too_large

__all__ = ["Connection", "RpcError", "describe"]

log = get_logger("dsh.chat")

RequestHandler = Callable[[str, Any], Awaitable[Any]]
NotificationHandler = Callable[[str, Any], None]


def describe(error: RpcError) -> str:
    """The error's message, and its ``data`` when that is a short text or a ``message``/``details`` field (what
    agents put there to say what to do), in one line."""
    detail: Any = error.data
    if isinstance(detail, dict):
        detail = detail.get("message") or detail.get("details") or detail.get("detail")
    if isinstance(detail, str) and detail.strip() and detail.strip() != error.message:
        return f"{error.message}: {' '.join(detail.split())[:500]}"
    return error.message


class Connection:
    def __init__(
        self,
        send: ByteSendStream,
        receive: ByteReceiveStream,
        *,
        on_request: RequestHandler,
        on_notification: NotificationHandler,
        trace: IO[bytes] | None = None,
        max_line: int = MAX_LINE,
    ) -> None:
        self._send = send
        self._max_line = max_line
        self._receive = receive
        self._on_request = on_request
        self._on_notification = on_notification
        self._trace = trace
        self._lock = anyio.Lock()
        self._ids = itertools.count()
        self._pending: dict[int, _Slot] = {}
        self._closed = False
        self.closed = anyio.Event()
        """Set when the agent's stdout has ended (or a frame could not be read)."""

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """Send a request and wait for its answer; an error answer raises :class:`RpcError`, a closed connection
        :class:`ConnectionError`."""
        if self._closed:
            raise ConnectionError("the agent has exited")
        request_id = next(self._ids)
        slot = self._pending[request_id] = _Slot()
        try:
            await self._write({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
            await slot.event.wait()
        finally:
            self._pending.pop(request_id, None)
        if slot.error is not None:
            raise slot.error
        return slot.result

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        if self._closed:
            return
        await self._write({"jsonrpc": "2.0", "method": method, "params": params})

    async def run(self, task_group: TaskGroup) -> None:
        """Read frames until the agent's stdout ends; requests are started in *task_group*."""
        try:
            async for line in read_lines(self._receive, self._max_line):
                if isinstance(line, Oversized):
                    self._oversized(line, task_group)
                    continue
                if not line.strip():
                    continue
                if self._trace is not None:
                    self._trace.write(b"< " + line + b"\n")
                    self._trace.flush()
                try:
                    message = orjson.loads(line)
                except orjson.JSONDecodeError:
                    log.warning("chat.bad_frame", frame=line[:200])
                    continue
                if isinstance(message, dict):
                    self._dispatch(message, task_group)
        finally:
            self._closed = True
            for slot in self._pending.values():
                slot.error = ConnectionError("the agent has exited")
                slot.event.set()
            self.closed.set()

    def _oversized(self, line: Oversized, task_group: TaskGroup) -> None:
        """A line of the agent over the cap: the request of ours it answers fails with the error; anything else
        is answered with it, ``id: null``, as the daemon answers a client's."""
        error = too_large(line.size, line.limit)
        log.error("chat.frame_too_long", size=line.size, limit=line.limit)
        answered = line.answer_id()
        slot = self._pending.get(answered) if isinstance(answered, int) else None
        if slot is not None:
            slot.error = RpcError(error.code, f"the agent's answer: {error.message}")
            slot.event.set()
            return
        task_group.start_soon(self._reply, {"jsonrpc": "2.0", "id": None, "error": error.to_json()})

    def _dispatch(self, message: dict[str, Any], task_group: TaskGroup) -> None:
        method = message.get("method")
        if isinstance(method, str):
            if "id" in message:
                task_group.start_soon(self._answer, message["id"], method, message.get("params"))
            else:
                try:
                    self._on_notification(method, message.get("params"))
                except Exception:
                    log.exception("chat.notification_failed", method=method)
            return
        slot = self._pending.get(message["id"]) if isinstance(message.get("id"), int) else None
        if slot is None:
            log.warning("chat.stray_response", id=message.get("id"))
            return
        error = message.get("error")
        if isinstance(error, dict):
            slot.error = RpcError(int(error.get("code", -32603)), str(error.get("message", "")), error.get("data"))
        else:
            slot.result = message.get("result")
        slot.event.set()

    async def _answer(self, request_id: Any, method: str, params: Any) -> None:
        try:
            result = await self._on_request(method, params)
        except RpcError as error:
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "error": error.to_json()}
        except Exception:
            log.exception("chat.handler_failed", method=method)
            reply = {"jsonrpc": "2.0", "id": request_id, "error": {"code": INTERNAL_ERROR, "message": "Internal error"}}
        else:
            reply = {"jsonrpc": "2.0", "id": request_id, "result": result if result is not None else {}}
        await self._reply(reply)

    async def _reply(self, reply: dict[str, Any]) -> None:
        """Send an answer to the agent; an agent already gone is no error (it asked nothing more)."""
        try:
            await self._write(reply)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError):
            pass

    async def _write(self, message: dict[str, Any]) -> None:
        frame = orjson.dumps(message)
        async with self._lock:
            if self._trace is not None:
                self._trace.write(b"> " + frame + b"\n")
                self._trace.flush()
            try:
                await self._send.send(frame + b"\n")
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as error:
                raise ConnectionError("the agent has exited") from error


class _Slot:
    __slots__ = ("error", "event", "result")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.result: Any = None
        self.error: Exception | None = None
