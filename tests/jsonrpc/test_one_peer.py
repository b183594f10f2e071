"""One JSON-RPC line peer below the daemon and the chat (issue #41 item 3): one cap, one framer, one report of an
oversized line (the error with ``id: null``, or the request of ours it answers failed with it), and the end keeps
serving.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import orjson
import pytest

from dsh.chat._rpc import Connection as ChatConnection
from dsh.frontends.acp._dispatch import make_dispatch
from dsh.frontends.acp._rpc import Connection as DaemonConnection
from dsh.jsonrpc import (
    INVALID_REQUEST,
    MAX_LINE,
    LineFramer,
    Oversized,
    RpcError,
    answer_id,
    read_lines,
    too_large,
)
from tests.support.raw import spawn_daemon

WAIT = 60  # hang detection only


def test_every_end_of_dsh_uses_the_one_cap() -> None:
    from dsh.frontends.serve import ServeOptions
    from dsh.mcp._stdio import STDOUT_LINE_LIMIT

    assert ServeOptions().max_frame == MAX_LINE
    assert STDOUT_LINE_LIMIT == MAX_LINE
    assert LineFramer()._max == MAX_LINE
    assert Oversized(1).limit == MAX_LINE


def test_an_answers_id_is_read_from_either_end_and_never_from_a_request() -> None:
    assert answer_id(b'{"jsonrpc":"2.0","id":7,"result":{"x":[[[[[') == 7
    assert answer_id(b'{"result":{"deep":[[[', b'[]]]},"jsonrpc":"2.0","id":12}') == 12
    assert answer_id(b'{"jsonrpc":"2.0","id":3,"method":"fs/read_text_file","params":{') is None


def test_the_error_names_the_size_and_the_limit() -> None:
    error = too_large(200_000_000, MAX_LINE)
    assert error.code == INVALID_REQUEST
    assert "200000000 bytes" in error.message and str(MAX_LINE) in error.message


async def test_lines_from_a_stream_are_the_framers_lines_and_end_with_the_stream() -> None:
    send, receive = anyio.create_memory_object_stream[bytes](10)

    class Stream:
        async def receive(self, max_bytes: int = 65536) -> bytes:
            return await receive.receive()

    big = b'{"jsonrpc":"2.0","id":4,"method":"m","params":"' + b"x" * 100 + b'"}'
    async with send:
        for chunk in (b'{"a":1}\n{"b"', b":2}\n" + big[:50], big[50:] + b"\nlast"):
            await send.send(chunk)
    with anyio.fail_after(WAIT):
        async with receive:
            lines = [line async for line in read_lines(Stream(), 64)]  # type: ignore[arg-type]
    assert lines == [b'{"a":1}', b'{"b":2}', Oversized(len(big), big, big, 64), b"last"]
    assert isinstance(lines[2], Oversized) and lines[2].answer_id() is None  # a request, not an answer


# -- the daemon's end --------------------------------------------------------------------------------------


class Sent:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    def send(self, frame: bytes) -> None:
        self.messages.append(json.loads(frame))


async def _echo(params: Any) -> dict[str, Any]:
    return {}


async def test_the_daemon_answers_an_oversized_request_with_id_null() -> None:
    """The id is not trusted from a line never read whole, whatever its start says."""
    sent = Sent()
    conn = DaemonConnection(sent.send, make_dispatch({}))
    head = b'{"jsonrpc":"2.0","id":"p-1","method":"session/prompt","params":{"prompt":[{"type":"image","data":"'
    async with anyio.create_task_group() as group:
        await conn.receive(Oversized(MAX_LINE + 10, head, b'"}]}}'), group)
        await conn.receive(Oversized(MAX_LINE + 10, b"garbage", b"garbage"), group)
    error = too_large(MAX_LINE + 10, MAX_LINE).to_json()
    assert sent.messages == [{"jsonrpc": "2.0", "id": None, "error": error}] * 2


async def test_an_oversized_answer_fails_the_daemons_request_instead_of_leaving_it_waiting() -> None:
    sent = Sent()
    conn = DaemonConnection(sent.send, make_dispatch({}))
    failure: list[RpcError] = []

    async def ask() -> None:
        with pytest.raises(RpcError) as caught:
            await conn.request("fs/read_text_file", {"path": "/x"})
        failure.append(caught.value)

    with anyio.fail_after(WAIT):
        async with anyio.create_task_group() as group:
            group.start_soon(ask)
            while not sent.messages:
                await (
                    anyio.lowlevel.checkpoint()
                )  # the request went out (no I/O here: a checkpoint, not a wait for time)
            request_id = sent.messages[0]["id"]
            answer = f'{{"jsonrpc":"2.0","id":{request_id},"result":{{"content":"'.encode()
            await conn.receive(Oversized(MAX_LINE + 1, answer, b'xxx"}}'), group)
    assert failure[0].code == INVALID_REQUEST
    assert too_large(MAX_LINE + 1, MAX_LINE).message in failure[0].message
    assert len(sent.messages) == 1  # nothing was answered to the client for it


async def test_the_daemon_answers_a_real_oversized_line_with_the_one_error_and_keeps_serving() -> None:
    """Over the wire: a line one byte over the cap, split across many pipe writes, is answered and nothing after
    it is lost."""
    head = b'{"jsonrpc":"2.0","id":41,"method":"session/prompt","params":{"sessionId":"s","prompt":"'
    tail = b'"}}'
    line = head + b"x" * (MAX_LINE + 1 - len(head) - len(tail)) + tail
    assert len(line) == MAX_LINE + 1
    with anyio.fail_after(WAIT):
        async with spawn_daemon() as daemon:
            await daemon.initialize()
            await daemon.send_bytes(line + b"\n")
            del line
            answer = await daemon.read_response()
            assert answer == {"jsonrpc": "2.0", "id": None, "error": too_large(MAX_LINE + 1, MAX_LINE).to_json()}
            await daemon.assert_serving(strict=True)


# -- the chat's end ----------------------------------------------------------------------------------------


async def test_the_chat_reports_an_oversized_line_the_daemons_way_and_keeps_reading() -> None:
    to_agent_send, to_agent_receive = anyio.create_memory_object_stream[bytes](100)
    from_agent_send, from_agent_receive = anyio.create_memory_object_stream[bytes](100)

    async def on_request(method: str, params: Any) -> Any:
        return {"echo": params}

    limit = 200
    connection = ChatConnection(  # memory streams of bytes: the same send and receive as byte streams
        to_agent_send,  # type: ignore[arg-type]
        from_agent_receive,  # type: ignore[arg-type]
        on_request=on_request,
        on_notification=lambda m, p: None,
        max_line=limit,
    )
    with anyio.fail_after(WAIT):
        async with to_agent_send, to_agent_receive, from_agent_receive, anyio.create_task_group() as group:
            group.start_soon(connection.run, group)
            # the agent's request over the cap: answered with the one error, id null, as the daemon answers
            write = b'{"jsonrpc":"2.0","id":9,"method":"fs/write_text_file","params":{"content":"' + b"y" * 300
            await from_agent_send.send(write + b'"}}\n')
            answer = orjson.loads(await to_agent_receive.receive())
            size = len(write) + 3
            assert answer == {"jsonrpc": "2.0", "id": None, "error": too_large(size, limit).to_json()}

            # an answer to our request over the cap: our request fails with the error instead of waiting
            async def ask() -> None:
                with pytest.raises(RpcError) as caught:
                    await connection.request("session/prompt", {})
                assert caught.value.code == INVALID_REQUEST
                assert "too large" in caught.value.message

            group.start_soon(ask)
            request = orjson.loads(await to_agent_receive.receive())
            big = f'{{"jsonrpc":"2.0","id":{request["id"]},"result":{{"text":"'.encode() + b"z" * 300 + b'"}}\n'
            await from_agent_send.send(big[:100])
            await from_agent_send.send(big[100:])
            # and the next line is read as ever
            await from_agent_send.send(b'{"jsonrpc":"2.0","id":"after","method":"ok","params":{}}\n')
            answer = orjson.loads(await to_agent_receive.receive())
            assert answer == {"jsonrpc": "2.0", "id": "after", "result": {"echo": {}}}
            await from_agent_send.aclose()


# -- dsh bridge's end --------------------------------------------------------------------------------------


async def test_the_bridge_answers_an_oversized_stdin_line_itself_and_keeps_the_connection(tmp_path: Path) -> None:
    """The line is never sent (the server would close the connection on it): the bridge answers it as the daemon
    does on stdio, and the requests around it are answered through the same connection. Once they are, the end of
    stdin ends the bridge: it does not wait out its grace for an answer it already wrote (an ``initialize`` result
    that names a ``"method"`` in its ``_meta`` used to be taken for a request of the server's)."""
    from dsh.frontends.serve._bridge import EOF_GRACE
    from tests.support.serve import TOKEN, running_server

    def initialize(request_id: int) -> bytes:
        params = {"protocolVersion": 1, "clientCapabilities": {}}
        return orjson.dumps({"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params})

    big = b'{"jsonrpc":"2.0","id":2,"method":"initialize","params":"' + b"x" * MAX_LINE + b'"}'
    async with running_server(tmp_path) as server:
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path), "DSH_SERVE_TOKEN": TOKEN}
        with anyio.fail_after(WAIT):
            started = anyio.current_time()
            result = await anyio.run_process(
                [sys.executable, "-m", "dsh", "bridge", server.url],
                env=env,
                check=False,
                input=initialize(1) + b"\n" + big + b"\n" + initialize(3) + b"\n",
            )
            took = anyio.current_time() - started
    assert result.returncode == 0, result.stderr[-2000:]
    assert took < EOF_GRACE, f"the bridge waited {took:.1f} s after the end of stdin for answers it had written"
    answers = [orjson.loads(line) for line in result.stdout.splitlines()]
    assert {"jsonrpc": "2.0", "id": None, "error": too_large(len(big), MAX_LINE).to_json()} in answers
    assert sorted(a["id"] for a in answers if "result" in a) == [1, 3]
    assert len(answers) == 3
