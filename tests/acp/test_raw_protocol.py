"""Raw-line protocol tests: the real daemon in a subprocess, fed bytes on stdin, every stdout line checked.

Each bad input is followed by a good ``initialize`` that must be answered: the daemon kept serving. For inputs
that must get no answer, that answer must be the very next line (``assert_serving(strict=True)``): nothing was
written in between. Every line read goes through :func:`tests.support.raw.check_frame` (UTF-8, strict JSON, one
compact JSON-RPC 2.0 message per line).

Most cases share one daemon (``daemon``, from a module-wide :class:`~tests.support.raw.DaemonPool` that replaces
it whenever a test leaves it dead or with unread answers); tests that end their daemon, or that need a scripted
model, spawn their own.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.support.raw import WAIT, DaemonPool, RawDaemon, compact, spawn_daemon, write_script
from tests.support.timing import promised

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
RESOURCE_NOT_FOUND = -32002
EXIT_WITHIN = promised(2.0)  # the promise: 2 s on a quiet machine (see tests/support/timing.py)
"""The issue: on stdin EOF or SIGTERM the daemon exits 0 within 2 s."""


@pytest.fixture(scope="module")
async def pool(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DaemonPool]:
    daemons = DaemonPool(tmp_path_factory.mktemp("raw-daemons"))
    try:
        yield daemons
    finally:
        await daemons.aclose()


@pytest.fixture
async def daemon(pool: DaemonPool) -> AsyncIterator[RawDaemon]:
    """A daemon shared with other tests: on release it must answer ``initialize`` as its very next line, or it is
    replaced (see :class:`DaemonPool`)."""
    process = await pool.borrow()
    try:
        yield process
    finally:
        await pool.release(process)


@pytest.fixture
async def fresh(tmp_path: Path) -> AsyncIterator[RawDaemon]:
    """A daemon of the test's own (for tests that end it)."""
    async with spawn_daemon(stderr_path=tmp_path / "stderr.log") as process:
        yield process


def _error(response: dict[str, Any], code: int, request_id: Any) -> dict[str, Any]:
    """Assert *response* is the error *code* for *request_id* (compared as JSON: type and value); return it."""
    assert "error" in response, f"expected error {code}, got {response!r:.400}"
    assert "id" in response, f"an error response must carry an id (null when unknown): {response!r:.400}"
    assert compact(response["id"]) == compact(request_id), f"id {response['id']!r} is not {request_id!r}"
    error: dict[str, Any] = response["error"]
    assert error["code"] == code, f"expected {code}, got {error!r:.400}"
    assert error["message"], "an error needs a message"
    return error


def _error_fields(error: dict[str, Any]) -> set[str]:
    """The fields an invalid-params error names: pydantic ``loc`` lists or a ``{"field": ...}`` mapping."""
    data = error.get("data")
    fields: set[str] = set()
    if isinstance(data, dict) and isinstance(data.get("field"), str):
        fields.add(data["field"])
    if isinstance(data, list):
        for entry in data:
            if isinstance(entry, dict) and isinstance(entry.get("loc"), list):
                fields.add(".".join(str(part) for part in entry["loc"]))
    return fields


def _chunks(updates: list[dict[str, Any]]) -> list[str]:
    """The texts of the ``agent_message_chunk`` updates, in order (other update kinds are not ours to check)."""
    return [u["content"]["text"] for u in updates if u.get("sessionUpdate") == "agent_message_chunk"]


# -- framing and envelope errors --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        b"garbage",
        b"{",
        b'{"jsonrpc":"2.0","id":1,"method":"initialize",}',
        b'{"jsonrpc":"2.0","id":1,"method":"initialize"}}',
        b"{'jsonrpc':'2.0','id':1,'method':'initialize'}",
        b'{"jsonrpc":"2.0","id":01,"method":"nope"}',
    ],
    ids=["word", "open-brace", "trailing-comma", "extra-brace", "single-quotes", "leading-zero"],
)
async def test_invalid_json_is_a_parse_error_with_null_id(daemon: RawDaemon, line: bytes) -> None:
    with anyio.fail_after(WAIT):
        await daemon.send_line(line)
        _error(await daemon.read_response(), PARSE_ERROR, None)
        await daemon.assert_serving(strict=True)


@pytest.mark.parametrize(
    "line",
    [
        pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"\xff\xfe"}', id="ff-fe"),
        pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"\xc3\x28"}', id="bad-continuation"),
        pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"\xc0\xaf"}', id="overlong"),
        pytest.param(b"\x80\x81\x82", id="lone-continuations"),
        pytest.param(
            b'{"jsonrpc":"2.0","id":1,"method":"\xed\xa0\x80"}',
            id="encoded-surrogate",
        ),
        pytest.param(
            '{"jsonrpc":"2.0","id":1,"method":"nope"}'.encode("utf-16-le"),
            id="utf-16",
        ),
    ],
)
async def test_invalid_utf8_is_a_parse_error(daemon: RawDaemon, line: bytes) -> None:
    with anyio.fail_after(WAIT):
        await daemon.send_line(line)
        _error(await daemon.read_response(), PARSE_ERROR, None)
        await daemon.assert_serving(strict=True)


@pytest.mark.parametrize(
    "line",
    [
        "[]",
        '[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}]',
        '[{"jsonrpc":"2.0","id":1,"method":"nope"},{"jsonrpc":"2.0","id":2,"method":"nope"}]',
        '[{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"x"}}]',
        "[1,2,3]",
    ],
    ids=["empty", "one-request", "two-requests", "one-notification", "numbers"],
)
async def test_batch_gets_one_invalid_request_with_null_id(daemon: RawDaemon, line: str) -> None:
    with anyio.fail_after(WAIT):
        await daemon.send_line(line)
        error = _error(await daemon.read_response(), INVALID_REQUEST, None)
        assert "batch" in error["message"].lower()
        # Not one entry of the batch was processed: the next line already answers the next request.
        await daemon.assert_serving(strict=True)


@pytest.mark.parametrize(
    "line",
    ["{}", '{"foo":1}', "1", '"x"', "null", "true", '{"jsonrpc":"2.0","id":3}', '{"jsonrpc":"2.0"}'],
    ids=["empty-object", "foo", "number", "string", "null", "true", "id-only", "jsonrpc-only"],
)
async def test_non_request_gets_invalid_request_with_null_id(daemon: RawDaemon, line: str) -> None:
    with anyio.fail_after(WAIT):
        await daemon.send_line(line)
        _error(await daemon.read_response(), INVALID_REQUEST, None)
        await daemon.assert_serving(strict=True)


@pytest.mark.parametrize(
    "method", ["nope", "session/set_archived", "session/set_thing", "_zed.dev/workspace/buffers", ""]
)
async def test_unknown_method_is_method_not_found_with_the_id(daemon: RawDaemon, method: str) -> None:
    with anyio.fail_after(WAIT):
        await daemon.send({"jsonrpc": "2.0", "id": "req-7", "method": method, "params": {}})
        error = _error(await daemon.read_response(), METHOD_NOT_FOUND, "req-7")
        assert error.get("data") == {"method": method}
        await daemon.assert_serving()


@pytest.mark.parametrize(
    "notification",
    [
        {"jsonrpc": "2.0", "method": "nope/notify", "params": {}},
        {"jsonrpc": "2.0", "method": "_zed.dev/ping"},
        {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "x", "update": {}}},
        {"jsonrpc": "2.0", "method": "initialize", "params": {"protocolVersion": "not a version"}},
        {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 12345}},
    ],
    ids=["unknown", "extension", "agent-side-method", "known-method-bad-params", "cancel-request-unknown-id"],
)
async def test_notification_gets_no_response(daemon: RawDaemon, notification: dict[str, Any]) -> None:
    with anyio.fail_after(WAIT):
        await daemon.send(notification)
        await daemon.assert_serving(strict=True)  # the very next line answers the request sent after it


async def test_a_prompt_sent_as_a_notification_is_ignored_and_does_not_block_the_reader(tmp_path: Path) -> None:
    """A request method without an id cannot be answered, so it is not run: no turn, no update, no response,
    and the reader goes straight on (a hanging model would otherwise stall it for good)."""
    model = write_script(tmp_path, [{"hang": True}])
    async with spawn_daemon(model=model, stderr_path=tmp_path / "stderr.log") as process:
        with anyio.fail_after(WAIT):
            await process.initialize()
            session_id = await process.new_session()
            params = {"sessionId": session_id, "prompt": [{"type": "text", "text": "go"}]}
            await process.send({"jsonrpc": "2.0", "method": "session/prompt", "params": params})
            request_id = process.next_id()
            await process.send(
                {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": {"protocolVersion": 1}}
            )
            message = await process.read()
            assert message.get("id") == request_id, f"expected the initialize answer first, got {message!r:.300}"
            # The session is idle: a real prompt runs (and hangs on the script) only if sent with an id.
            await process.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}})
            await process.initialize()


# -- params -------------------------------------------------------------------------------------------------


async def test_session_new_without_cwd_names_the_field(daemon: RawDaemon) -> None:
    with anyio.fail_after(WAIT):
        await daemon.send({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"mcpServers": []}})
        error = _error(await daemon.read_response(), INVALID_PARAMS, 1)
        assert "cwd" in _error_fields(error), error
        await daemon.assert_serving()


@pytest.mark.parametrize("prompt", ["hello", {"type": "text", "text": "hello"}, None, 5])
async def test_prompt_that_is_not_a_list_names_the_field(daemon: RawDaemon, prompt: Any) -> None:
    with anyio.fail_after(WAIT):
        session_id = await daemon.new_session()
        params = {"sessionId": session_id, "prompt": prompt}
        await daemon.send({"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": params})
        error = _error(await daemon.read_response(), INVALID_PARAMS, 2)
        assert "prompt" in _error_fields(error), error
        await daemon.assert_serving()


@pytest.mark.parametrize("params", [[], ["/tmp"], "x", 1, None, True])
async def test_params_not_an_object_is_invalid_params(daemon: RawDaemon, params: Any) -> None:
    with anyio.fail_after(WAIT):
        await daemon.send({"jsonrpc": "2.0", "id": 3, "method": "session/new", "params": params})
        _error(await daemon.read_response(), INVALID_PARAMS, 3)
        await daemon.assert_serving()


async def test_prompt_for_unknown_session_is_resource_not_found(daemon: RawDaemon) -> None:
    with anyio.fail_after(WAIT):
        params = {"sessionId": "no-such-session", "prompt": [{"type": "text", "text": "hi"}]}
        await daemon.send({"jsonrpc": "2.0", "id": 4, "method": "session/prompt", "params": params})
        error = _error(await daemon.read_response(), RESOURCE_NOT_FOUND, 4)
        assert error.get("data", {}).get("sessionId") == "no-such-session"
        await daemon.assert_serving()


@pytest.mark.parametrize("cwd", ["relative/dir", ".", "", "~/project"])
async def test_relative_cwd_is_invalid_params(daemon: RawDaemon, cwd: str) -> None:
    with anyio.fail_after(WAIT):
        await daemon.send({"jsonrpc": "2.0", "id": 5, "method": "session/new", "params": {"cwd": cwd}})
        error = _error(await daemon.read_response(), INVALID_PARAMS, 5)
        assert "cwd" in _error_fields(error), error
        await daemon.assert_serving()


@pytest.mark.parametrize(
    "prompt",
    [[], [{"type": "text", "text": ""}], [{"type": "text", "text": "  \n\t "}, {"type": "text", "text": "\r\n"}]],
    ids=["no-blocks", "empty-text", "whitespace"],
)
async def test_empty_prompt_is_invalid_params_without_hanging(daemon: RawDaemon, prompt: list[Any]) -> None:
    with anyio.fail_after(WAIT):
        session_id = await daemon.new_session()
        response, updates = await daemon.prompt(session_id, prompt)
        _error(response, INVALID_PARAMS, response["id"])
        assert updates == []
        # The session stays usable.
        response, _ = await daemon.prompt(session_id, "still here")
        assert response["result"] == {"stopReason": "end_turn"}
        await daemon.assert_serving()


async def test_an_image_block_that_is_not_an_image_is_invalid_params(daemon: RawDaemon) -> None:
    """The offline default (echo) takes images (RFC 0022), so the daemon advertises them; a block whose bytes
    are no image (the PNG signature alone) is -32602 naming the block. A model without vision: tests/images."""
    with anyio.fail_after(WAIT):
        result = await daemon.initialize()
        assert result["agentCapabilities"]["promptCapabilities"]["image"] is True
        session_id = await daemon.new_session()
        image = {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}
        response, updates = await daemon.prompt(session_id, [{"type": "text", "text": "look"}, image])
        error = _error(response, INVALID_PARAMS, response["id"])
        assert "prompt[1]" in error["message"] and "not a PNG, JPEG, GIF or WebP image" in error["message"]
        assert updates == []
        await daemon.assert_serving()


@pytest.mark.parametrize(
    "block",
    [
        {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
        {"type": "video", "uri": "file:///tmp/x.mp4"},
        {"type": "resource", "resource": {"uri": "file:///tmp/x.bin", "blob": "AAAA"}},
        {"text": "no type"},
        "just a string",
    ],
    ids=["audio", "unknown-type", "binary-resource", "missing-type", "not-an-object"],
)
async def test_unsupported_block_is_invalid_params(daemon: RawDaemon, block: Any) -> None:
    with anyio.fail_after(WAIT):
        session_id = await daemon.new_session()
        response, updates = await daemon.prompt(session_id, [{"type": "text", "text": "see"}, block])
        _error(response, INVALID_PARAMS, response["id"])
        assert updates == []
        await daemon.assert_serving()


# -- methods ------------------------------------------------------------------------------------------------


async def test_authenticate_with_the_advertised_method_succeeds(daemon: RawDaemon) -> None:
    with anyio.fail_after(WAIT):
        result = await daemon.initialize()
        methods = result["authMethods"]
        assert len(methods) >= 1
        response = await daemon.request("authenticate", {"methodId": methods[0]["id"]}, request_id=6)
        assert response == {"jsonrpc": "2.0", "id": 6, "result": {}}
        await daemon.assert_serving()


@pytest.mark.parametrize("method_id", ["api-key", "", "DSH-LOCAL"])
async def test_authenticate_with_another_method_is_invalid_params(daemon: RawDaemon, method_id: str) -> None:
    with anyio.fail_after(WAIT):
        await daemon.initialize()
        response = await daemon.request("authenticate", {"methodId": method_id}, request_id=7)
        _error(response, INVALID_PARAMS, 7)
        await daemon.assert_serving()


@pytest.mark.parametrize("requested", [1, 2, 3, 65535, "2024-11-05", "2025-06-18"])
async def test_initialize_negotiates_version_1(daemon: RawDaemon, requested: Any) -> None:
    with anyio.fail_after(WAIT):
        result = await daemon.initialize(requested)
        assert result["protocolVersion"] == 1
        assert type(result["protocolVersion"]) is int
        assert result["agentInfo"]["name"] == "dsh"
        await daemon.assert_serving()


async def test_initialize_with_an_unsupported_older_version_answers_1(daemon: RawDaemon) -> None:
    with anyio.fail_after(WAIT):
        result = await daemon.initialize(0)
        assert result["protocolVersion"] == 1


async def test_cancel_for_unknown_session_does_nothing(daemon: RawDaemon) -> None:
    with anyio.fail_after(WAIT):
        await daemon.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "no-such-session"}})
        await daemon.assert_serving(strict=True)
        # An idle cancel of a real session does nothing either, and the session still works.
        session_id = await daemon.new_session()
        await daemon.send({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}})
        await daemon.assert_serving(strict=True)
        response, _ = await daemon.prompt(session_id, "after cancel")
        assert response["result"] == {"stopReason": "end_turn"}


# -- ids ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "request_id",
    [
        0,
        7,
        -7,
        2**62,
        2**63 - 1,
        -(2**63),
        10**30,
        1.5,
        1.0,
        -0.0,
        1e300,
        "abc",
        "",
        'é☃ \U0001f389 \u2028 \\ " \t',
        "7",
        None,
        True,
        False,
        {"a": [1, {"b": None}], "c": "d"},
        {},
        [],
        [1, "x", None, 1.0, True],
    ],
    ids=lambda value: f"{type(value).__name__}:{compact(value)[:24]}",
)
async def test_request_id_is_echoed_verbatim(daemon: RawDaemon, request_id: Any) -> None:
    with anyio.fail_after(WAIT):
        await daemon.send_line(f'{{"jsonrpc":"2.0","id":{compact(request_id)},"method":"nope"}}')
        line_count = len(daemon.lines)
        response = await daemon.read_response()
        _error(response, METHOD_NOT_FOUND, request_id)
        assert type(response["id"]) is type(request_id)
        # The id's JSON text is exactly what was sent (for ints, strings, bools, null, arrays and objects).
        line = daemon.lines[line_count]
        assert any(
            f'"id":{text}'.encode() in line for text in (compact(request_id), compact(request_id, ensure_ascii=False))
        )
        await daemon.assert_serving()


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
async def test_non_json_number_constants_are_parse_errors(daemon: RawDaemon, constant: str) -> None:
    with anyio.fail_after(WAIT):
        await daemon.send_line(f'{{"jsonrpc":"2.0","id":{constant},"method":"nope"}}')
        _error(await daemon.read_response(), PARSE_ERROR, None)
        await daemon.assert_serving()


async def test_out_of_range_number_id_never_produces_invalid_json(daemon: RawDaemon) -> None:
    with anyio.fail_after(WAIT):
        await daemon.send_line('{"jsonrpc":"2.0","id":1e400,"method":"nope"}')
        response = await daemon.read_response()  # check_frame: strict JSON, or this fails
        assert "error" in response
        assert response["error"]["code"] in (PARSE_ERROR, METHOD_NOT_FOUND)
        assert response["id"] is None or isinstance(response["id"], int | float)
        await daemon.assert_serving()


@pytest.mark.parametrize(
    "line",
    [
        "[" * 100_000 + "]" * 100_000,
        '{"a":' * 5_000 + "1" + "}" * 5_000,
        '{"jsonrpc":"2.0","id":' + "[" * 2_000 + "]" * 2_000 + ',"method":"nope"}',
    ],
    ids=["deep-array", "deep-object", "deep-id"],
)
async def test_deeply_nested_json_is_an_error_not_a_crash(fresh: RawDaemon, line: str) -> None:
    daemon = fresh
    with anyio.fail_after(WAIT):
        await daemon.send_line(line)
        response = await daemon.read_response()
        assert response["id"] is None
        assert response["error"]["code"] in (PARSE_ERROR, INVALID_REQUEST)
        await daemon.assert_serving()


# -- framing ------------------------------------------------------------------------------------------------


async def test_blank_lines_are_ignored(daemon: RawDaemon) -> None:
    with anyio.fail_after(WAIT):
        await daemon.send_bytes(b"\n\n   \n\t\n\r\n \t \r\n")
        await daemon.assert_serving(strict=True)


async def test_crlf_line_endings_are_accepted(daemon: RawDaemon) -> None:
    with anyio.fail_after(WAIT):
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
        await daemon.send_bytes(compact(init).encode() + b"\r\n")
        response = await daemon.read_response()
        assert response["id"] == 1 and response["result"]["protocolVersion"] == 1
        new = {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}}
        await daemon.send_bytes(compact(new).encode() + b"\r\n")
        response = await daemon.read_response()
        session_id = response["result"]["sessionId"]
        prompt = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "session/prompt",
            "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": "crlf works"}]},
        }
        await daemon.send_bytes(compact(prompt).encode() + b"\r\n")
        response, notifications = await daemon.collect(3)
        assert response["result"] == {"stopReason": "end_turn"}
        assert "".join(_chunks([n["params"]["update"] for n in notifications])) == "crlf works"
        await daemon.assert_serving()


async def test_a_frame_split_across_many_writes_is_one_frame(daemon: RawDaemon) -> None:
    with anyio.fail_after(WAIT):
        frame = compact({"jsonrpc": "2.0", "id": 9, "method": "nope"}).encode() + b"\n"
        for index in range(len(frame)):
            await daemon.send_bytes(frame[index : index + 1])
        _error(await daemon.read_response(), METHOD_NOT_FOUND, 9)
        await daemon.assert_serving()


async def test_20_mib_prompt_line_is_answered_and_streamed_back(daemon: RawDaemon) -> None:
    with anyio.fail_after(WAIT):
        session_id = await daemon.new_session()
        words = [f"w{index:02d}" + "x" * (1 << 20) for index in range(20)]
        text = " ".join(words)
        request = {
            "jsonrpc": "2.0",
            "id": "big",
            "method": "session/prompt",
            "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
        }
        line = compact(request).encode()
        assert len(line) > 20 * (1 << 20)
        await daemon.send_line(line)
        response, notifications = await daemon.collect("big")
        assert response["result"] == {"stopReason": "end_turn"}
        chunks = _chunks([n["params"]["update"] for n in notifications])
        assert len(chunks) == len(words)  # echo streams one chunk per word
        assert "".join(chunks) == text
        await daemon.assert_serving()


async def test_huge_garbage_line_is_a_parse_error(daemon: RawDaemon) -> None:
    with anyio.fail_after(WAIT):
        await daemon.send_line(b'{"jsonrpc":"2.0","id":1,"method":"' + b"\x01garbage" * (4 << 20))
        _error(await daemon.read_response(), PARSE_ERROR, None)
        await daemon.assert_serving()


async def test_line_over_the_frame_limit_is_rejected_and_the_stream_recovers(daemon: RawDaemon) -> None:
    with anyio.fail_after(WAIT):
        # A request-looking prefix: the id is not trusted from a frame that was never read whole.
        await daemon.send_line(b'{"jsonrpc":"2.0","id":1,"method":"nope","x":"' + b"z" * (129 << 20) + b'"}')
        _error(await daemon.read_response(), INVALID_REQUEST, None)
        await daemon.assert_serving()


# -- lifetime -----------------------------------------------------------------------------------------------


async def test_stdin_eof_exits_0_within_2_seconds(fresh: RawDaemon) -> None:
    daemon = fresh
    with anyio.fail_after(WAIT):
        await daemon.initialize()
        await daemon.new_session()
        start = time.monotonic()
        await daemon.close_stdin()
        assert await daemon.read_until_eof() == []
        code, _ = await daemon.wait_exit()
        elapsed = time.monotonic() - start
    assert code == 0, daemon.stderr_text()[-2000:]
    assert elapsed < EXIT_WITHIN, f"exit took {elapsed:.2f} s"


async def _hang_in_a_turn(process: RawDaemon) -> tuple[str, int]:
    """Start a prompt whose turn hangs; return once the prompt was surely accepted (its first tool card came)."""
    await process.initialize()
    session_id = await process.new_session()
    request_id = process.next_id()
    params = {"sessionId": session_id, "prompt": [{"type": "text", "text": "hang"}]}
    await process.send({"jsonrpc": "2.0", "id": request_id, "method": "session/prompt", "params": params})
    while True:
        message = await process.read()
        assert "method" in message, f"the prompt ended early: {message!r:.300}"
        if message["params"]["update"].get("sessionUpdate") == "tool_call":
            return session_id, request_id


_HANG_SCRIPT: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "no_such_tool", "arguments": {}, "id": "call_sync"}]},
    {"hang": True},
]


@pytest.mark.parametrize("how", ["sigterm", "eof"])
async def test_shutdown_during_a_running_prompt_answers_it_cancelled_and_exits_0(tmp_path: Path, how: str) -> None:
    model = write_script(tmp_path, _HANG_SCRIPT)
    async with spawn_daemon(model=model, stderr_path=tmp_path / "stderr.log") as process:
        with anyio.fail_after(WAIT):
            _, request_id = await _hang_in_a_turn(process)
            start = time.monotonic()
            if how == "sigterm":
                process.signal(signal.SIGTERM)
            else:
                await process.close_stdin()
            response, _ = await process.collect(request_id)
            assert response["result"] == {"stopReason": "cancelled"}
            await process.read_until_eof()  # whatever else comes, every line is checked
            code, _ = await process.wait_exit()
            elapsed = time.monotonic() - start
        assert code == 0, process.stderr_text()[-2000:]
        assert elapsed < EXIT_WITHIN, f"exit took {elapsed:.2f} s"


# -- output shape -------------------------------------------------------------------------------------------


async def test_every_line_is_one_compact_json_message(fresh: RawDaemon) -> None:
    daemon = fresh
    with anyio.fail_after(WAIT):
        await daemon.initialize()
        session_id = await daemon.new_session()
        text = 'line one\nline two\r\n\ttabbed "quoted" \\ back é☃ \U0001f389 \u2028 \x00 end'
        response, updates = await daemon.prompt(session_id, text)
        assert response["result"] == {"stopReason": "end_turn"}
        assert "".join(_chunks(updates)) == text
        await daemon.send_line(b"not json")
        await daemon.read_response()
        await daemon.send({"jsonrpc": "2.0", "id": [1, {"k": "v"}], "method": "nope", "params": {"a": [1, 2]}})
        await daemon.read_response()
        await daemon.close_stdin()
        await daemon.read_until_eof()
    assert len(daemon.lines) >= 6
    for line in daemon.lines:
        message = json.loads(line)
        assert b"\n" not in line and not line.endswith(b"\r")
        assert line.decode() in (compact(message), compact(message, ensure_ascii=False))
