"""JSON-RPC 2.0 over frames: classify what arrives, dispatch requests, correlate our own requests.

Inbound requests are dispatched with jsonrpcserver (see :mod:`._dispatch`); everything jsonrpcserver cannot do
is here: framing errors, batches, responses to our requests, ``$/cancel_request``, and id echo.

Guarantees:

* Every inbound request gets exactly one response with its id echoed verbatim (whatever JSON type it is);
  every malformed frame gets an error with ``id: null``; notifications never get a response.
* Each inbound request runs as its own task: a request waiting on the client (a prompt waiting for a
  permission answer) never stalls the reader, so ``session/cancel`` always gets through.
* Notifications are handled inline, in arrival order (their handlers must not block).
* An outbound request either gets the client's answer, or fails with :class:`RpcError` on timeout (after
  sending ``$/cancel_request``) or when the connection closes.
* :meth:`Connection.request_until` asks for no longer than a turn: when the turn is cancelled, the client gets
  :data:`ANSWER_GRACE` seconds to answer (ACP: a client answers its pending permission requests ``cancelled``
  after ``session/cancel``) before the request is withdrawn with ``$/cancel_request``; a request the client
  answered is never withdrawn. A late answer to a withdrawn request is expected traffic, logged at debug level,
  never as a warning.
"""

from __future__ import annotations

import contextvars
import itertools
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

import anyio
import anyio.abc

from dsh._jsonlimits import MAX_JSON_DEPTH, exceeds_depth, text_may_exceed
from dsh._log import get_logger
from dsh.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_CANCELLED,
    RESOURCE_NOT_FOUND,
    Oversized,
    RpcError,
    too_large,
)
from dsh.kernel import CancelToken, abortable
from dsh.services.sessions import dumps_json, parse_json

__all__ = [
    "INTERNAL_ERROR",
    "arrival",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "REQUEST_CANCELLED",
    "RESOURCE_NOT_FOUND",
    "Connection",
    "RpcError",
]

ANSWER_GRACE = 0.5
"""Seconds a client gets to answer a request of a cancelled turn before it is withdrawn (``request_until``)."""
_WITHDRAWN_KEPT = 256

log = get_logger("dsh.acp")
ANSWERED_KEPT = 256
"""How many answered request ids are remembered to recognise a second answer (then a debug line, not a warning)."""
_TOO_DEEP = f"JSON nested deeper than {MAX_JSON_DEPTH} levels"

Dispatch = Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None]]

_arrival: contextvars.ContextVar[int] = contextvars.ContextVar("dsh_rpc_arrival", default=-1)
_after: contextvars.ContextVar[list[Callable[[], None]] | None] = contextvars.ContextVar("dsh_rpc_after", default=None)


def arrival() -> int:
    """The arrival number of the request or notification being handled (frames are numbered as read).

    Handlers run concurrently, so one that must respect the order in which the client *sent* things (a cancel
    must cover every prompt sent before it, even if that prompt's task has not reached the agent yet)
    compares arrival numbers instead of trusting the order in which tasks happen to run.
    """
    return _arrival.get()


def dumps(message: dict[str, Any]) -> bytes:
    """Compact UTF-8 JSON (orjson), always valid UTF-8 (a lone surrogate a tool produced is written escaped);
    a non-finite number or a non-string key raises :class:`~dsh.services.sessions.NotJsonError` (a
    ``ValueError``) rather than put ``NaN`` (not JSON) or a silently renamed key on the wire."""
    return dumps_json(message)


class _Outbound:
    __slots__ = ("done", "error", "result")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.result: Any = None
        self.error: RpcError | None = None


class Connection:
    """One JSON-RPC peer. ``dispatch`` answers a request or notification dict (jsonrpcserver behind it)."""

    def __init__(
        self, send_frame: Callable[[bytes], None], dispatch: Dispatch, *, notifications: frozenset[str] = frozenset()
    ) -> None:
        """*notifications*: the methods that are notifications (handled inline, in order); any other method
        that arrives without an id is ignored, never run: a request sent as a notification could not be
        answered, and running it inline would stall the reader."""
        self._send_frame = send_frame
        self._dispatch = dispatch
        self._notifications = notifications
        self._ids = itertools.count()
        self._arrivals = itertools.count()
        self._outbound: dict[int, _Outbound] = {}
        self._answered: deque[int] = deque(maxlen=ANSWERED_KEPT)
        """Ids of the latest requests answered: a second answer to one of them is ignored quietly."""
        self._withdrawn: OrderedDict[int, None] = OrderedDict()
        self._inbound: dict[Hashable, anyio.CancelScope] = {}
        self._closed = False

    # -- sending ----------------------------------------------------------------------------------------

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self._send_frame(dumps({"jsonrpc": "2.0", "method": method, "params": params}))

    def _respond_error(self, request_id: Any, error: RpcError) -> None:
        self._send_frame(dumps({"jsonrpc": "2.0", "id": request_id, "error": error.to_json()}))

    async def request(self, method: str, params: dict[str, Any], *, deadline: float | None = None) -> Any:
        """Send a request to the client and return its result (raises :class:`RpcError`).

        *deadline* is in seconds from now; on expiry the client is sent ``$/cancel_request``.
        """
        if self._closed:
            raise RpcError(INTERNAL_ERROR, "the connection is closed")
        request_id = next(self._ids)
        slot = _Outbound()
        self._outbound[request_id] = slot
        timed_out = False
        try:
            self._send_frame(dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))
            with anyio.move_on_after(deadline) as scope:
                await slot.done.wait()
            timed_out = scope.cancelled_caught
        finally:
            self._finish(request_id, slot)
        if timed_out:
            raise RpcError(REQUEST_CANCELLED, f"{method} timed out after {deadline} s")
        if slot.error is not None:
            raise slot.error
        return slot.result

    async def request_until(
        self, method: str, params: dict[str, Any], signal: CancelToken | None, *, grace: float = ANSWER_GRACE
    ) -> tuple[bool, Any]:
        """Send a request that lasts no longer than the turn of *signal*: ``(True, result)`` when the client
        answered (raises :class:`RpcError` for an error answer), ``(False, None)`` when the turn was cancelled
        and the client did not answer within *grace* seconds (then the request was withdrawn)."""
        if self._closed:
            raise RpcError(INTERNAL_ERROR, "the connection is closed")
        request_id = next(self._ids)
        slot = _Outbound()
        self._outbound[request_id] = slot
        try:
            self._send_frame(dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))
            with abortable(signal):
                await slot.done.wait()
            if not slot.done.is_set():  # the turn was cancelled: the client is due to answer (``cancelled``)
                with anyio.move_on_after(grace):
                    await slot.done.wait()
        finally:
            self._finish(request_id, slot, answer_expected=True)
        if not slot.done.is_set():
            return False, None
        if slot.error is not None:
            raise slot.error
        return True, slot.result

    def _finish(self, request_id: int, slot: _Outbound, *, answer_expected: bool = False) -> None:
        """Forget an outbound request; one the client has not answered is withdrawn (``$/cancel_request``, once).
        *answer_expected*: the client is due to answer it anyway (a turn's cancel), so its late answer is
        remembered as expected traffic; a late answer to a timed-out request stays a warning."""
        self._outbound.pop(request_id, None)
        if not slot.done.is_set():
            if answer_expected:
                self._withdrawn[request_id] = None
                while len(self._withdrawn) > _WITHDRAWN_KEPT:
                    self._withdrawn.popitem(last=False)
            if not self._closed:
                self.notify("$/cancel_request", {"requestId": request_id})

    def close(self) -> None:
        """Fail every outbound request still waiting for an answer."""
        self._closed = True
        for slot in self._outbound.values():
            if not slot.done.is_set():  # an answer that arrived stays the answer
                slot.error = RpcError(INTERNAL_ERROR, "the connection closed before the client answered")
                slot.done.set()

    # -- receiving --------------------------------------------------------------------------------------

    async def receive(self, frame: bytes | Oversized, handlers: anyio.abc.TaskGroup) -> None:
        """Handle one inbound frame; requests are started in *handlers*. Never raises: whatever one frame
        does, the reader goes on to the next."""
        try:
            await self._receive(frame, handlers)
        except Exception:
            log.exception("frame handling failed")
            self._respond_error(None, RpcError(INTERNAL_ERROR, "Internal error"))

    async def _receive(self, frame: bytes | Oversized, handlers: anyio.abc.TaskGroup) -> None:
        if isinstance(frame, Oversized):
            self._reject_oversized(frame)
            return
        if not frame.strip():
            return
        try:
            message = parse_json(frame)  # UTF-8 only; NaN, Infinity and 1e400 are not JSON
        except RecursionError:
            self._respond_error(None, RpcError(PARSE_ERROR, f"Parse error: {_TOO_DEEP}"))
            return
        except ValueError as exc:  # UnicodeDecodeError is a ValueError
            self._respond_error(None, RpcError(PARSE_ERROR, "Parse error", str(exc)[:200]))
            return
        if text_may_exceed(frame) and exceeds_depth(message):
            self._reject_deep(message)
            return
        if isinstance(message, list):
            self._respond_error(None, RpcError(INVALID_REQUEST, "JSON-RPC batches are not supported by ACP"))
            return
        if not isinstance(message, dict):
            self._respond_error(None, RpcError(INVALID_REQUEST, "Invalid request: not a JSON-RPC object"))
            return
        if "method" in message:
            await self._receive_call(message, handlers)
        elif "id" in message and ("result" in message or "error" in message):
            self._receive_response(message)
        else:
            self._respond_error(None, RpcError(INVALID_REQUEST, "Invalid request: no method, result or error"))

    def _reject_oversized(self, line: Oversized) -> None:
        """A line over the limit (never read, only counted): an answer to one of our requests fails that request;
        anything else gets the error with ``id: null`` (an id is not trusted from a line never read whole)."""
        error = too_large(line.size, line.limit)
        answered = line.answer_id()
        slot = self._outbound.get(answered) if isinstance(answered, int) else None
        if slot is not None and not slot.done.is_set():
            slot.error = RpcError(INVALID_REQUEST, f"the client's answer: {error.message}")
            slot.done.set()
            return
        self._respond_error(None, error)

    def _reject_deep(self, message: Any) -> None:
        """A frame nested deeper than :data:`MAX_JSON_DEPTH`: nothing of it is handled (its data could not be
        stored); a request gets -32602 with its id, an answer to our request fails that request."""
        shallow = message if isinstance(message, dict) else {}
        request_id = shallow.get("id")
        if "method" in shallow:
            if "id" in shallow:  # an id that is itself the deep part is not echoed
                echoed = None if exceeds_depth(request_id, MAX_JSON_DEPTH - 1) else request_id
                self._respond_error(echoed, RpcError(INVALID_PARAMS, f"Invalid params: {_TOO_DEEP}"))
            else:
                log.warning("ignored a notification nested too deep", method=str(shallow["method"])[:100])
            return
        slot = self._outbound.get(request_id) if isinstance(request_id, int) else None
        if slot is not None and not slot.done.is_set():
            slot.error = RpcError(INVALID_PARAMS, f"the client's answer is {_TOO_DEEP}")
            slot.done.set()
            return
        self._respond_error(None, RpcError(INVALID_REQUEST, f"Invalid request: {_TOO_DEEP}"))

    async def _receive_call(self, message: dict[str, Any], handlers: anyio.abc.TaskGroup) -> None:
        is_request = "id" in message
        request_id = message.get("id")
        method = message["method"]
        params = message.get("params", {})
        problem = None
        if not isinstance(method, str):
            problem = RpcError(INVALID_REQUEST, "Invalid request: method must be a string")
        elif message.get("jsonrpc") != "2.0":
            problem = RpcError(INVALID_REQUEST, 'Invalid request: "jsonrpc" must be "2.0"')
        elif not isinstance(params, dict):
            problem = RpcError(INVALID_PARAMS, "Invalid params: params must be an object")
        if problem is not None:
            if is_request:
                self._respond_error(request_id, problem)
            return
        call = {"jsonrpc": "2.0", "method": method, "params": params}
        number = next(self._arrivals)
        if not is_request:
            if method == "$/cancel_request":
                self._cancel_inbound(params.get("requestId"))
                return
            if method not in self._notifications:
                log.info("ignored a notification", method=method[:100])
                return
            token = _arrival.set(number)
            try:
                await self._dispatch(call)
            finally:
                _arrival.reset(token)
            return
        call["id"] = request_id
        handlers.start_soon(self._serve, call, number, name=f"rpc:{method}")

    def after_response(self, callback: Callable[[], None]) -> None:
        """Run *callback* right after the response to the request being handled has been sent (and only if
        one is: a cancelled request runs none). Outside a request handler it runs at once."""
        callbacks = _after.get()
        if callbacks is None:
            callback()
        else:
            callbacks.append(callback)

    async def _serve(self, call: dict[str, Any], number: int) -> None:
        _arrival.set(number)  # this task's own context
        callbacks: list[Callable[[], None]] = []
        _after.set(callbacks)
        request_id = call["id"]
        key = _key(request_id)
        scope = anyio.CancelScope()
        if key is not None:
            self._inbound[key] = scope
        response: dict[str, Any] | None = None
        try:
            with scope:
                response = await self._dispatch(call)
            if scope.cancelled_caught:
                response = None
                self._respond_error(request_id, RpcError(REQUEST_CANCELLED, "Request cancelled"))
        finally:
            if key is not None and self._inbound.get(key) is scope:
                del self._inbound[key]
        if response is not None:
            response["id"] = request_id  # verbatim, whatever its JSON type
            try:
                frame = dumps(response)
            except ValueError:  # a result that is not JSON: a bug, but the client still gets its answer
                log.exception("response is not JSON", method=call["method"])
                frame = dumps(
                    {"jsonrpc": "2.0", "id": request_id, "error": {"code": INTERNAL_ERROR, "message": "Internal error"}}
                )
            self._send_frame(frame)
            if "result" in response:
                for callback in callbacks:
                    try:
                        callback()
                    except Exception:
                        log.exception("after-response callback failed", method=call["method"])

    def _cancel_inbound(self, request_id: Any) -> None:
        key = _key(request_id)
        scope = self._inbound.get(key) if key is not None else None
        if scope is not None:
            scope.cancel()

    def _receive_response(self, message: dict[str, Any]) -> None:
        request_id = message["id"]
        is_ours = isinstance(request_id, int) and not isinstance(request_id, bool)  # we never send bool ids
        slot = self._outbound.get(request_id) if is_ours else None
        if slot is None or slot.done.is_set():
            if slot is not None or request_id in self._answered:  # the first answer settled it
                log.debug("a second answer to a request was ignored", request_id=repr(request_id)[:80])
                return
            if is_ours and self._withdrawn.pop(request_id, False) is None:
                log.debug("answer to a withdrawn request", request_id=request_id)
                return
            log.warning("response to an unknown request", request_id=repr(request_id)[:80])
            return
        self._answered.append(request_id)
        error = message.get("error")
        if error is not None:
            code = error.get("code") if isinstance(error, dict) else None
            if isinstance(error, dict) and isinstance(code, int) and not isinstance(code, bool):
                slot.error = RpcError(code, str(error.get("message", "")), error.get("data"))
            else:
                slot.error = RpcError(INTERNAL_ERROR, f"malformed error response from the client: {error!r:.200}")
        else:
            slot.result = message.get("result")
        slot.done.set()


def _key(request_id: Any) -> Hashable | None:
    """A dict key for an id (ids of any JSON type are echoed; only str/int ids can be cancelled)."""
    if isinstance(request_id, bool):
        return None
    if isinstance(request_id, str | int):
        return (type(request_id).__name__, request_id)
    return None
