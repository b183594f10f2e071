"""The JSON-RPC connection in memory: classification, errors, id echo, concurrency, cancellation, the correlator.

Frames the connection sends are collected in a list; ``receive`` runs with a real task group. The method table
goes through :func:`make_dispatch` (jsonrpcserver behind it), exactly as the daemon wires it.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import anyio.abc
import pytest
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel
from structlog.testing import capture_logs

from dsh.frontends.acp._dispatch import MethodTable, make_dispatch
from dsh.frontends.acp._rpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_CANCELLED,
    RESOURCE_NOT_FOUND,
    Connection,
    RpcError,
)
from dsh.jsonrpc import Oversized

with warnings.catch_warnings():
    # jsonrpcserver 5.0.9 calls importlib.resources.open_text/read_text at import; the DeprecationWarning is
    # attributed to importlib, so pyproject's "ignore::DeprecationWarning:jsonrpcserver.*" does not match it.
    warnings.simplefilter("ignore", DeprecationWarning)
    import jsonrpcserver  # noqa: F401

# -- fixtures -------------------------------------------------------------------------------------------


class Params(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, validate_by_alias=True)
    session_id: str
    count: int = 0


class Empty(BaseModel):
    pass


class Sent:
    """The client's side of the wire: every frame the connection wrote, parsed, with a way to wait for one."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self._changed = anyio.Event()

    def send(self, frame: bytes) -> None:
        assert b"\n" not in frame, "a frame must be one line"
        message = json.loads(frame)  # must be JSON
        assert isinstance(message, dict)
        assert message["jsonrpc"] == "2.0"
        self.frames.append(frame)
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    @property
    def messages(self) -> list[dict[str, Any]]:
        return [json.loads(frame) for frame in self.frames]

    async def wait_for(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        with anyio.fail_after(5):
            while True:
                changed = self._changed
                for message in self.messages:
                    if predicate(message):
                        return message
                await changed.wait()

    async def response(self, request_id: Any) -> dict[str, Any]:
        return await self.wait_for(lambda m: "method" not in m and _same(m.get("id"), request_id))


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON, types included (``True`` is not ``1``, ``1.0`` is not ``1``)."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


class Handlers:
    """A small method table whose handlers record what they saw and can be held open."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.gate = anyio.Event()
        self.started = anyio.Event()
        self.cleaned_up = anyio.Event()

    async def echo(self, params: Params) -> dict[str, Any]:
        self.calls.append(("echo", params))
        return {"sessionId": params.session_id, "count": params.count}

    async def block(self, params: Params) -> dict[str, Any]:
        self.calls.append(("block", params))
        self.started.set()
        try:
            await self.gate.wait()
        finally:
            self.cleaned_up.set()
        return {"unblocked": params.session_id}

    async def nothing(self, params: Empty) -> None:
        self.calls.append(("nothing", params))

    async def note(self, params: Params) -> None:
        for _ in range(5):  # several checkpoints: a handler started as a task would not be done yet
            await anyio.lowlevel.checkpoint()
        self.calls.append(("note", params.session_id))

    async def not_found(self, params: Params) -> None:
        raise RpcError(RESOURCE_NOT_FOUND, f"unknown session {params.session_id!r}", {"sessionId": params.session_id})

    async def plain_error(self, params: Empty) -> None:
        raise RpcError(INVALID_PARAMS, "no data here")

    async def crash(self, params: Empty) -> None:
        raise ValueError("secret-token-4711 at /home/user/.ssh/id_rsa")

    def table(self) -> MethodTable:
        return {
            "echo": (Params, self.echo),
            "block": (Params, self.block),
            "nothing": (Empty, self.nothing),
            "note": (Params, self.note),
            "not_found": (Params, self.not_found),
            "plain_error": (Empty, self.plain_error),
            "crash": (Empty, self.crash),
        }


@pytest.fixture
def sent() -> Sent:
    return Sent()


@pytest.fixture
def handlers() -> Handlers:
    return Handlers()


@pytest.fixture
def conn(sent: Sent, handlers: Handlers) -> Connection:
    return Connection(sent.send, make_dispatch(handlers.table()), notifications=frozenset({"note"}))


@pytest.fixture
async def tg() -> AsyncIterator[anyio.abc.TaskGroup]:
    # A handler left running at the end of a test is a failure (TimeoutError), not a hang.
    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            yield group


def frame(message: Any) -> bytes:
    return json.dumps(message).encode()


def request(request_id: Any, method: str, params: Any = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return frame(message)


def notification(method: str, params: Any = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return frame(message)


async def receive_all(conn: Connection, *frames: bytes | Oversized) -> None:
    """Feed frames and wait until every request they started has finished."""
    async with anyio.create_task_group() as group:
        for item in frames:
            await conn.receive(item, group)


def only_error(sent: Sent) -> dict[str, Any]:
    assert len(sent.messages) == 1, sent.messages
    (message,) = sent.messages
    assert set(message) == {"jsonrpc", "id", "error"}
    error = message["error"]
    assert isinstance(error["code"], int)
    assert isinstance(error["message"], str)
    assert error["message"]
    return message


# -- classification and errors --------------------------------------------------------------------------


@pytest.mark.parametrize("raw", [b"{", b"{not json}", b'{"a":1', b"nul", b"\xff\xfe{}", b'{"id":1,}'])
async def test_invalid_json_is_a_parse_error_with_id_null(conn: Connection, sent: Sent, raw: bytes) -> None:
    await receive_all(conn, raw)
    message = only_error(sent)
    assert message["id"] is None
    assert message["error"]["code"] == PARSE_ERROR


@pytest.mark.parametrize(
    "raw",
    [b"[]", request(1, "echo", {"sessionId": "s"}).join([b"[", b"]"]), b"[1, 2]"],
    ids=["empty", "one-request", "numbers"],
)
async def test_a_batch_is_one_invalid_request_with_id_null(
    conn: Connection, sent: Sent, handlers: Handlers, raw: bytes
) -> None:
    await receive_all(conn, raw)
    message = only_error(sent)
    assert message["id"] is None
    assert message["error"]["code"] == INVALID_REQUEST
    assert handlers.calls == []


@pytest.mark.parametrize("raw", [b"1", b"1.5", b'"echo"', b"null", b"true", b"false"])
async def test_a_non_object_is_an_invalid_request_with_id_null(conn: Connection, sent: Sent, raw: bytes) -> None:
    await receive_all(conn, raw)
    message = only_error(sent)
    assert message["id"] is None
    assert message["error"]["code"] == INVALID_REQUEST


@pytest.mark.parametrize(
    "message", [{}, {"jsonrpc": "2.0"}, {"jsonrpc": "2.0", "id": 3}, {"jsonrpc": "2.0", "id": 3, "params": {}}]
)
async def test_an_object_without_method_result_or_error_is_an_invalid_request(
    conn: Connection, sent: Sent, message: dict[str, Any]
) -> None:
    await receive_all(conn, frame(message))
    reply = only_error(sent)
    assert reply["id"] is None
    assert reply["error"]["code"] == INVALID_REQUEST


async def test_an_oversized_frame_is_an_invalid_request_with_id_null(conn: Connection, sent: Sent) -> None:
    await receive_all(conn, Oversized(200_000_000))
    reply = only_error(sent)
    assert reply["id"] is None
    assert reply["error"]["code"] == INVALID_REQUEST
    assert "200000000" in reply["error"]["message"]


@pytest.mark.parametrize("raw", [b"", b"   ", b"\r", b"\t \r"])
async def test_blank_frames_are_ignored(conn: Connection, sent: Sent, raw: bytes) -> None:
    await receive_all(conn, raw)
    assert sent.frames == []


@pytest.mark.parametrize(
    "version", [{"jsonrpc": "1.0"}, {"jsonrpc": 2.0}, {"jsonrpc": None}, {}], ids=["1.0", "number", "null", "missing"]
)
async def test_a_request_without_jsonrpc_2_0_is_an_invalid_request_with_its_id(
    conn: Connection, sent: Sent, handlers: Handlers, version: dict[str, Any]
) -> None:
    await receive_all(conn, frame({**version, "id": 7, "method": "echo", "params": {"sessionId": "s"}}))
    reply = only_error(sent)
    assert reply["id"] == 7
    assert reply["error"]["code"] == INVALID_REQUEST
    assert handlers.calls == []


@pytest.mark.parametrize("method", [5, None, ["echo"], {"name": "echo"}, True])
async def test_a_method_that_is_not_a_string_is_an_invalid_request(
    conn: Connection, sent: Sent, handlers: Handlers, method: Any
) -> None:
    await receive_all(conn, frame({"jsonrpc": "2.0", "id": 3, "method": method, "params": {}}))
    reply = only_error(sent)
    assert reply["id"] == 3
    assert reply["error"]["code"] == INVALID_REQUEST
    assert handlers.calls == []


@pytest.mark.parametrize("params", [[1, 2], [], "sessionId", 5, None, True])
async def test_params_that_are_not_an_object_are_invalid_params(
    conn: Connection, sent: Sent, handlers: Handlers, params: Any
) -> None:
    await receive_all(conn, frame({"jsonrpc": "2.0", "id": 4, "method": "echo", "params": params}))
    reply = only_error(sent)
    assert reply["id"] == 4
    assert reply["error"]["code"] == INVALID_PARAMS
    assert handlers.calls == []


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "1.0", "method": "echo", "params": {"sessionId": "s"}},
        {"jsonrpc": "2.0", "method": 5, "params": {}},
        {"jsonrpc": "2.0", "method": "echo", "params": [1]},
        {"jsonrpc": "2.0", "method": "echo", "params": {"sessionId": 5}},
        {"jsonrpc": "2.0", "method": "no/such/method"},
        {"jsonrpc": "2.0", "method": "crash", "params": {}},
        {"jsonrpc": "2.0", "method": "not_found", "params": {"sessionId": "s"}},
    ],
    ids=["version", "method-type", "params-type", "params-invalid", "unknown", "crash", "rpc-error"],
)
async def test_a_notification_never_gets_a_response(conn: Connection, sent: Sent, message: dict[str, Any]) -> None:
    with capture_logs():
        await receive_all(conn, frame(message))
    assert sent.frames == []


async def test_an_omitted_params_is_an_empty_object(conn: Connection, sent: Sent, handlers: Handlers) -> None:
    await receive_all(conn, request(1, "nothing"))
    assert sent.messages == [{"jsonrpc": "2.0", "id": 1, "result": {}}]
    assert [name for name, _ in handlers.calls] == ["nothing"]


async def test_an_unknown_method_is_method_not_found_naming_it(conn: Connection, sent: Sent) -> None:
    await receive_all(conn, request("q", "session/teleport", {}))
    reply = only_error(sent)
    assert reply["id"] == "q"
    assert reply["error"]["code"] == METHOD_NOT_FOUND
    assert "session/teleport" in reply["error"]["message"]
    assert reply["error"]["data"] == {"method": "session/teleport"}


# -- id echo ----------------------------------------------------------------------------------------------

ID_VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    7,
    2**63 - 1,
    2**70,
    1.5,
    -0.25,
    1e300,
    "",
    "abc",
    "1",
    "ünïcødé ✓",
    "a\nb",
    [],
    [1, "x", None],
    {},
    {"k": [None, {"z": 1}]},
]


@pytest.mark.parametrize("request_id", ID_VALUES, ids=[json.dumps(v) for v in ID_VALUES])
async def test_request_ids_of_every_json_type_are_echoed_verbatim(
    conn: Connection, sent: Sent, request_id: Any
) -> None:
    await receive_all(conn, request(request_id, "echo", {"sessionId": "s", "count": 2}))
    assert len(sent.frames) == 1
    reply = sent.messages[0]
    assert _same(reply["id"], request_id)
    assert reply["result"] == {"sessionId": "s", "count": 2}


@pytest.mark.parametrize("request_id", [None, "r-1", 0, 2.5, [1]], ids=["null", "str", "int", "float", "array"])
@pytest.mark.parametrize("method", ["no/such", "crash", "not_found", "echo", "block-badparams"])
async def test_error_responses_echo_the_id_verbatim(conn: Connection, sent: Sent, request_id: Any, method: str) -> None:
    params: dict[str, Any] = {} if method != "not_found" else {"sessionId": "s"}
    name = "block" if method == "block-badparams" else method
    with capture_logs():
        await receive_all(conn, request(request_id, name, params))
    reply = only_error(sent)
    assert _same(reply["id"], request_id)


# -- concurrency ------------------------------------------------------------------------------------------


async def test_each_request_runs_as_its_own_task(
    conn: Connection, sent: Sent, handlers: Handlers, tg: anyio.abc.TaskGroup
) -> None:
    await conn.receive(request(1, "block", {"sessionId": "first"}), tg)
    await handlers.started.wait()
    # The reader is free while request 1 waits: request 2 is read, run and answered first.
    await conn.receive(request(2, "echo", {"sessionId": "second"}), tg)
    assert (await sent.response(2))["result"] == {"sessionId": "second", "count": 0}
    assert [m["id"] for m in sent.messages] == [2]
    handlers.gate.set()
    assert (await sent.response(1))["result"] == {"unblocked": "first"}
    assert [m["id"] for m in sent.messages] == [2, 1]


async def test_notifications_are_handled_inline_in_arrival_order(
    conn: Connection, sent: Sent, handlers: Handlers, tg: anyio.abc.TaskGroup
) -> None:
    await conn.receive(notification("note", {"sessionId": "a"}), tg)
    assert handlers.calls == [("note", "a")]  # done by the time receive returned
    await conn.receive(notification("note", {"sessionId": "b"}), tg)
    await conn.receive(notification("note", {"sessionId": "c"}), tg)
    assert handlers.calls == [("note", "a"), ("note", "b"), ("note", "c")]
    assert sent.frames == []


async def test_a_method_that_is_not_a_notification_is_ignored_without_an_id(
    conn: Connection, sent: Sent, handlers: Handlers, tg: anyio.abc.TaskGroup
) -> None:
    """A request sent as a notification cannot be answered, so it is never run (it could block the reader)."""
    await conn.receive(notification("block", {"sessionId": "s"}), tg)
    for _ in range(5):
        await anyio.lowlevel.checkpoint()
    assert handlers.calls == []
    assert not handlers.started.is_set()
    assert sent.frames == []


# -- $/cancel_request ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("request_id", [1, "req-1", 0, ""], ids=["int", "str", "zero", "empty-str"])
async def test_cancel_request_cancels_an_inbound_request_which_answers_32800(
    conn: Connection, sent: Sent, handlers: Handlers, tg: anyio.abc.TaskGroup, request_id: Any
) -> None:
    await conn.receive(request(request_id, "block", {"sessionId": "s"}), tg)
    await handlers.started.wait()
    await conn.receive(notification("$/cancel_request", {"requestId": request_id}), tg)
    reply = await sent.response(request_id)
    assert reply["error"]["code"] == REQUEST_CANCELLED
    assert _same(reply["id"], request_id)
    assert handlers.cleaned_up.is_set()
    assert len(sent.frames) == 1  # answered exactly once, and the cancel notification itself is not answered


async def test_cancel_request_matches_ids_by_type_and_ignores_unknown_ids(
    conn: Connection, sent: Sent, handlers: Handlers, tg: anyio.abc.TaskGroup
) -> None:
    await conn.receive(request(1, "block", {"sessionId": "s"}), tg)
    await handlers.started.wait()
    for other in ["1", 1.5, 2, None, True, [1]]:
        await conn.receive(notification("$/cancel_request", {"requestId": other}), tg)
    await conn.receive(notification("$/cancel_request", {}), tg)
    await conn.receive(notification("$/cancel_request"), tg)
    for _ in range(10):
        await anyio.lowlevel.checkpoint()
    assert sent.frames == []
    assert not handlers.cleaned_up.is_set()
    handlers.gate.set()
    assert (await sent.response(1))["result"] == {"unblocked": "s"}


async def test_cancel_request_after_the_answer_changes_nothing(
    conn: Connection, sent: Sent, tg: anyio.abc.TaskGroup
) -> None:
    await conn.receive(request(5, "echo", {"sessionId": "s"}), tg)
    await sent.response(5)
    await conn.receive(notification("$/cancel_request", {"requestId": 5}), tg)
    for _ in range(10):
        await anyio.lowlevel.checkpoint()
    assert len(sent.frames) == 1
    assert "result" in sent.messages[0]


# -- outbound correlator --------------------------------------------------------------------------------------


def outbound(sent: Sent, method: str) -> list[dict[str, Any]]:
    return [m for m in sent.messages if m.get("method") == method]


async def sent_requests(sent: Sent, method: str, count: int = 1) -> list[dict[str, Any]]:
    """Wait until *count* requests of *method* went out; return them."""
    await sent.wait_for(lambda _: len(outbound(sent, method)) >= count)
    return outbound(sent, method)


class Outcomes:
    """What background ``conn.request`` calls returned (or the :class:`RpcError` they raised), in order."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self._changed = anyio.Event()

    def start(
        self,
        tg: anyio.abc.TaskGroup,
        conn: Connection,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        label: str | None = None,
    ) -> None:
        async def run() -> None:
            value: Any
            try:
                value = await conn.request(method, params or {})
            except RpcError as exc:
                value = exc
            self.values.append(value if label is None else (label, value))
            changed, self._changed = self._changed, anyio.Event()
            changed.set()

        tg.start_soon(run)

    async def wait(self, count: int = 1) -> list[Any]:
        with anyio.fail_after(5):
            while len(self.values) < count:
                await self._changed.wait()
        return self.values


@pytest.fixture
def outcomes() -> Outcomes:
    return Outcomes()


async def test_request_sends_a_request_and_resolves_with_the_clients_result(
    conn: Connection, sent: Sent, tg: anyio.abc.TaskGroup, outcomes: Outcomes
) -> None:
    outcomes.start(tg, conn, "fs/read_text_file", {"sessionId": "s", "path": "/a"})
    (sent_request,) = await sent_requests(sent, "fs/read_text_file")
    assert set(sent_request) == {"jsonrpc", "id", "method", "params"}
    assert sent_request["params"] == {"sessionId": "s", "path": "/a"}
    await conn.receive(frame({"jsonrpc": "2.0", "id": sent_request["id"], "result": {"content": "hello"}}), tg)
    assert await outcomes.wait() == [{"content": "hello"}]
    assert len(sent.frames) == 1  # a response is never answered


@pytest.mark.parametrize("result", [None, [], [1, 2], "text", 0, {"nested": {"a": [None]}}])
async def test_request_returns_a_result_of_any_json_type(
    conn: Connection, sent: Sent, tg: anyio.abc.TaskGroup, outcomes: Outcomes, result: Any
) -> None:
    outcomes.start(tg, conn, "x/y")
    (sent_request,) = await sent_requests(sent, "x/y")
    await conn.receive(frame({"jsonrpc": "2.0", "id": sent_request["id"], "result": result}), tg)
    (value,) = await outcomes.wait()
    assert _same(value, result)


async def test_request_raises_the_clients_error(
    conn: Connection, sent: Sent, tg: anyio.abc.TaskGroup, outcomes: Outcomes
) -> None:
    outcomes.start(tg, conn, "fs/read_text_file", {"sessionId": "s", "path": "/nope"})
    (sent_request,) = await sent_requests(sent, "fs/read_text_file")
    error = {"code": RESOURCE_NOT_FOUND, "message": "no such file", "data": {"uri": "/nope"}}
    await conn.receive(frame({"jsonrpc": "2.0", "id": sent_request["id"], "error": error}), tg)
    (exc,) = await outcomes.wait()
    assert isinstance(exc, RpcError)
    assert (exc.code, exc.message, exc.data) == (RESOURCE_NOT_FOUND, "no such file", {"uri": "/nope"})
    assert exc.to_json() == error


async def test_concurrent_requests_get_distinct_ids_and_their_own_answers(
    conn: Connection, sent: Sent, tg: anyio.abc.TaskGroup, outcomes: Outcomes
) -> None:
    for name in ("a", "b", "c"):
        outcomes.start(tg, conn, "x/ask", {"name": name}, label=name)
    asked = {m["params"]["name"]: m["id"] for m in await sent_requests(sent, "x/ask", 3)}
    assert len(set(asked.values())) == 3
    for name in ("c", "a", "b"):  # answered out of order
        await conn.receive(frame({"jsonrpc": "2.0", "id": asked[name], "result": name.upper()}), tg)
    assert dict(await outcomes.wait(3)) == {"a": "A", "b": "B", "c": "C"}


async def test_request_times_out_with_deadline_and_then_sends_cancel_request(conn: Connection, sent: Sent) -> None:
    with anyio.fail_after(5), pytest.raises(RpcError) as caught:
        await conn.request("session/request_permission", {"sessionId": "s"}, deadline=0.05)
    assert caught.value.code == REQUEST_CANCELLED
    (sent_request,) = outbound(sent, "session/request_permission")
    cancels = outbound(sent, "$/cancel_request")
    assert cancels
    assert all(c["params"] == {"requestId": sent_request["id"]} and "id" not in c for c in cancels)
    assert sent.messages[0] == sent_request  # the request went out first, the cancel after


async def test_a_timed_out_request_sends_exactly_one_cancel_request(conn: Connection, sent: Sent) -> None:
    with anyio.fail_after(5), pytest.raises(RpcError):
        await conn.request("session/request_permission", {"sessionId": "s"}, deadline=0.01)
    assert len(outbound(sent, "$/cancel_request")) == 1


async def test_a_caller_cancelled_while_waiting_sends_exactly_one_cancel_request(
    conn: Connection, sent: Sent, tg: anyio.abc.TaskGroup
) -> None:
    with anyio.CancelScope() as scope:

        async def cancel_when_sent() -> None:
            await sent_requests(sent, "x/slow")
            scope.cancel()

        tg.start_soon(cancel_when_sent)
        await conn.request("x/slow", {})
    assert scope.cancelled_caught
    (sent_request,) = outbound(sent, "x/slow")
    assert outbound(sent, "$/cancel_request") == [
        {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": sent_request["id"]}}
    ]


async def test_close_fails_pending_requests_and_later_requests(
    conn: Connection, sent: Sent, tg: anyio.abc.TaskGroup, outcomes: Outcomes
) -> None:
    outcomes.start(tg, conn, "x/pending")
    outcomes.start(tg, conn, "x/pending")
    await sent_requests(sent, "x/pending", 2)
    conn.close()
    errors = await outcomes.wait(2)
    assert all(isinstance(e, RpcError) and e.code == INTERNAL_ERROR for e in errors)
    before = len(sent.frames)
    with pytest.raises(RpcError) as caught:
        await conn.request("x/after", {})
    assert caught.value.code == INTERNAL_ERROR
    assert outbound(sent, "x/after") == []
    assert len(sent.frames) == before


async def test_an_answer_that_arrived_before_close_stays_the_answer(
    conn: Connection, sent: Sent, tg: anyio.abc.TaskGroup, outcomes: Outcomes
) -> None:
    outcomes.start(tg, conn, "x/ask")
    (sent_request,) = await sent_requests(sent, "x/ask")
    await conn.receive(frame({"jsonrpc": "2.0", "id": sent_request["id"], "result": "answered"}), tg)
    conn.close()  # before the waiting task got to run
    assert await outcomes.wait() == ["answered"]


async def settle() -> None:
    """Let every ready task run (used only to show that something does *not* happen)."""
    for _ in range(20):
        await anyio.lowlevel.checkpoint()


@pytest.mark.parametrize("stray_id", [999, "0", None, 0.5, [0]], ids=["unknown-int", "str", "null", "float", "array"])
async def test_responses_with_unknown_ids_are_dropped_with_a_warning(
    conn: Connection, sent: Sent, tg: anyio.abc.TaskGroup, outcomes: Outcomes, stray_id: Any
) -> None:
    outcomes.start(tg, conn, "x/ask")
    (sent_request,) = await sent_requests(sent, "x/ask")
    assert sent_request["id"] == 0  # the stray "0" below differs from it only by type
    with capture_logs() as logs:
        await conn.receive(frame({"jsonrpc": "2.0", "id": stray_id, "result": "stray"}), tg)
        await conn.receive(frame({"jsonrpc": "2.0", "id": stray_id, "error": {"code": -1, "message": "x"}}), tg)
    warnings = [entry for entry in logs if entry["log_level"] == "warning"]
    assert len(warnings) == 2
    assert sent.frames == [sent.frames[0]]  # nothing answered
    await settle()
    assert outcomes.values == []  # still waiting for its own answer
    await conn.receive(frame({"jsonrpc": "2.0", "id": 0, "result": "mine"}), tg)
    assert await outcomes.wait() == ["mine"]


async def test_a_late_response_after_a_timeout_is_dropped_with_a_warning(
    conn: Connection, sent: Sent, tg: anyio.abc.TaskGroup
) -> None:
    with pytest.raises(RpcError):
        await conn.request("x/late", {}, deadline=0.01)
    (sent_request,) = outbound(sent, "x/late")
    before = len(sent.frames)
    with capture_logs() as logs:
        await conn.receive(frame({"jsonrpc": "2.0", "id": sent_request["id"], "result": {}}), tg)
    assert [entry["log_level"] for entry in logs] == ["warning"]
    assert len(sent.frames) == before


async def test_a_boolean_response_id_does_not_match_an_integer_request(
    conn: Connection, sent: Sent, tg: anyio.abc.TaskGroup, outcomes: Outcomes
) -> None:
    outcomes.start(tg, conn, "x/ask")
    outcomes.start(tg, conn, "x/ask")
    assert sorted(m["id"] for m in await sent_requests(sent, "x/ask", 2)) == [0, 1]
    with capture_logs() as logs:
        await conn.receive(b'{"jsonrpc":"2.0","id":true,"result":"bool"}', tg)
    assert [entry["log_level"] for entry in logs] == ["warning"]
    await settle()
    assert outcomes.values == []
    conn.close()
    await outcomes.wait(2)


@pytest.mark.parametrize("code", ["abc", None, [1], {"c": 1}, True, "-32000"])
async def test_a_malformed_error_code_from_the_client_fails_the_request_not_the_connection(
    conn: Connection, sent: Sent, tg: anyio.abc.TaskGroup, outcomes: Outcomes, code: Any
) -> None:
    outcomes.start(tg, conn, "x/ask")
    (sent_request,) = await sent_requests(sent, "x/ask")
    try:
        await conn.receive(
            frame({"jsonrpc": "2.0", "id": sent_request["id"], "error": {"code": code, "message": "m"}}), tg
        )
    finally:
        conn.close()  # whatever happened, let the waiting task finish
    (error,) = await outcomes.wait()
    assert isinstance(error, RpcError)
    assert error.code == INTERNAL_ERROR
    assert "closed" not in error.message  # failed by the malformed answer, not by close()


@pytest.mark.parametrize("error", ["boom", 5, ["x"], True], ids=["string", "int", "list", "bool"])
async def test_a_non_object_error_from_the_client_is_a_malformed_error(
    conn: Connection, sent: Sent, tg: anyio.abc.TaskGroup, outcomes: Outcomes, error: Any
) -> None:
    outcomes.start(tg, conn, "x/ask")
    (sent_request,) = await sent_requests(sent, "x/ask")
    await conn.receive(frame({"jsonrpc": "2.0", "id": sent_request["id"], "error": error}), tg)
    (exc,) = await outcomes.wait()
    assert isinstance(exc, RpcError)
    assert exc.code == INTERNAL_ERROR


# -- make_dispatch: the jsonrpcserver adapter -----------------------------------------------------------------


async def test_invalid_params_are_32602_with_the_field_errors(conn: Connection, sent: Sent, handlers: Handlers) -> None:
    await receive_all(conn, request(1, "echo", {"count": "many", "extra": True}))
    reply = only_error(sent)
    assert reply["id"] == 1
    error = reply["error"]
    assert error["code"] == INVALID_PARAMS
    fields = {tuple(item["loc"]): item["type"] for item in error["data"]}
    assert fields == {("sessionId",): "missing", ("count",): "int_parsing"}
    for item in error["data"]:
        assert isinstance(item["msg"], str)
        assert "input" not in item  # the client's own data is not echoed back
        assert "url" not in item
    assert handlers.calls == []


async def test_params_are_validated_into_the_model(conn: Connection, sent: Sent, handlers: Handlers) -> None:
    await receive_all(conn, request(1, "echo", {"sessionId": "abc", "count": 3, "_meta": {"x": 1}}))
    assert sent.messages == [{"jsonrpc": "2.0", "id": 1, "result": {"sessionId": "abc", "count": 3}}]
    ((name, params),) = handlers.calls
    assert name == "echo"
    assert isinstance(params, Params)
    assert (params.session_id, params.count) == ("abc", 3)


async def test_a_handler_returning_none_answers_an_empty_object(conn: Connection, sent: Sent) -> None:
    await receive_all(conn, request(1, "nothing", {}))
    assert sent.messages == [{"jsonrpc": "2.0", "id": 1, "result": {}}]


async def test_an_rpc_error_raised_by_a_handler_becomes_that_error(conn: Connection, sent: Sent) -> None:
    await receive_all(conn, request(1, "not_found", {"sessionId": "gone"}), request(2, "plain_error", {}))
    by_id = {m["id"]: m for m in sent.messages}
    assert by_id[1]["error"] == {
        "code": RESOURCE_NOT_FOUND,
        "message": "unknown session 'gone'",
        "data": {"sessionId": "gone"},
    }
    assert by_id[2]["error"] == {"code": INVALID_PARAMS, "message": "no data here"}


async def test_an_unexpected_exception_is_32603_without_its_text_and_the_traceback_is_logged(
    conn: Connection, sent: Sent
) -> None:
    with capture_logs() as logs:
        await receive_all(conn, request(1, "crash", {}))
    reply = only_error(sent)
    assert reply["id"] == 1
    assert reply["error"]["code"] == INTERNAL_ERROR
    assert "secret-token-4711" not in sent.frames[0].decode()
    assert ".ssh" not in sent.frames[0].decode()
    failures = [entry for entry in logs if entry["log_level"] == "error"]
    assert len(failures) == 1
    assert failures[0].get("exc_info") is True  # log.exception: the traceback goes to the log
    assert failures[0].get("method") == "crash"


async def test_the_connection_keeps_serving_after_every_kind_of_error(conn: Connection, sent: Sent) -> None:
    with capture_logs():
        await receive_all(
            conn,
            b"{",
            b"[]",
            b"5",
            request(1, "crash", {}),
            request(2, "echo", [1]),
            request(3, "nope"),
            Oversized(10**9),
            request(4, "echo", {"sessionId": "still-here"}),
        )
    assert sent.messages[-1] == {"jsonrpc": "2.0", "id": 4, "result": {"sessionId": "still-here", "count": 0}}
    assert len(sent.frames) == 8


# -- the JSON nesting limit (#10 item 1) ---------------------------------------------------------------------


def _deep(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


@pytest.mark.parametrize("depth", [129, 500])
async def test_a_request_nested_too_deep_is_invalid_params_with_its_id_and_never_handled(
    conn: Connection, sent: Sent, handlers: Handlers, depth: int
) -> None:
    raw = ('{"jsonrpc":"2.0","id":7,"method":"echo","params":{"sessionId":"s","extra":' + _deep(depth) + "}}").encode()
    await receive_all(conn, raw)
    message = only_error(sent)
    assert message["id"] == 7
    assert message["error"]["code"] == INVALID_PARAMS
    assert "nested deeper than 128 levels" in message["error"]["message"]
    assert handlers.calls == []


async def test_a_request_at_the_limit_is_handled(conn: Connection, sent: Sent, handlers: Handlers) -> None:
    # the frame object + params + extra = 3 levels around the nested value: 128 in all
    raw = ('{"jsonrpc":"2.0","id":7,"method":"echo","params":{"sessionId":"s","extra":' + _deep(125) + "}}").encode()
    await receive_all(conn, raw)
    assert (await sent.response(7))["result"] == {"sessionId": "s", "count": 0}


async def test_a_notification_nested_too_deep_is_dropped(conn: Connection, sent: Sent, handlers: Handlers) -> None:
    raw = ('{"jsonrpc":"2.0","method":"note","params":{"sessionId":"s","x":' + _deep(300) + "}}").encode()
    await receive_all(conn, raw)
    assert sent.messages == []
    assert handlers.calls == []


async def test_json_too_deep_for_the_parser_is_a_parse_error_naming_the_limit(conn: Connection, sent: Sent) -> None:
    await receive_all(conn, ("[" * 100_000 + "]" * 100_000).encode())
    message = only_error(sent)
    assert message["id"] is None
    assert message["error"]["code"] == PARSE_ERROR
    assert "nested deeper than 128 levels" in message["error"]["message"]


async def test_an_answer_nested_too_deep_fails_our_request(conn: Connection, sent: Sent) -> None:
    async def ask() -> None:
        with pytest.raises(RpcError) as caught:
            await conn.request("fs/read_text_file", {"path": "/x"})
        assert caught.value.code == INVALID_PARAMS
        assert "nested deeper than 128 levels" in caught.value.message

    async with anyio.create_task_group() as group:
        group.start_soon(ask)
        asked = await sent.wait_for(lambda m: m.get("method") == "fs/read_text_file")
        answer = '{"jsonrpc":"2.0","id":' + json.dumps(asked["id"]) + ',"result":' + _deep(200) + "}"
        await conn.receive(answer.encode(), group)
