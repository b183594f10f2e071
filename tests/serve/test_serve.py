"""``dsh serve`` over a real WebSocket on 127.0.0.1 (RFC 0038): the official SDK client through ``dsh bridge``
and a plain WebSocket client of our own run sessions with tool calls and permission requests; every refusal
(token, Origin, frame size, capacity) is a refusal of that connection only."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from dsh.jsonrpc import answer_id
from tests.support.editor import EditorClient, call, run_editor, write_script
from tests.support.serve import TOKEN, auth, running_server, ws_client

DEADLINE = 60.0


def write_file_script(tmp_path: Path) -> str:
    return write_script(
        tmp_path / "script.json",
        [call("write_file", "w1", path="hello.txt", content="hello\n"), {"text": "written"}],
    )


async def test_sdk_client_through_the_bridge_runs_a_tool_call_with_a_permission(tmp_path: Path) -> None:
    async with running_server(tmp_path, write_file_script(tmp_path)) as server:
        client = EditorClient(["allow_once"])
        bridge = [sys.executable, "-m", "dsh", "bridge", server.url]
        async with run_editor(tmp_path, "echo", client, command=bridge, env={"DSH_SERVE_TOKEN": TOKEN}) as editor:
            session = (await editor.new_session()).session_id
            with anyio.fail_after(DEADLINE):
                response = await editor.prompt(session, "write it")
            assert response.stop_reason == "end_turn"
            assert (editor.project / "hello.txt").read_text(encoding="utf-8") == "hello\n"
            assert editor.final(session, "w1")["status"] == "completed"
            assert editor.client.text(session) == "written"
        assert len(client.permissions()) == 1


async def test_plain_websocket_client_runs_a_tool_call_with_a_permission(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    async with running_server(tmp_path, write_file_script(tmp_path)) as server, ws_client(server.url) as client:
        with anyio.fail_after(DEADLINE):
            session = await client.start(project)
            response = await client.request(
                "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "write it"}]}
            )
        assert response["result"]["stopReason"] == "end_turn"
        assert (project / "hello.txt").read_text(encoding="utf-8") == "hello\n"
        asked = [m for m in client.messages if m.get("method") == "session/request_permission"]
        assert len(asked) == 1 and asked[0]["params"]["toolCall"]["toolCallId"] == "w1"
        kinds = [u["sessionUpdate"] for u in client.updates(session)]
        assert "tool_call" in kinds and "agent_message_chunk" in kinds


async def _refused(url: str, **kwargs: object) -> int:
    with pytest.raises(InvalidStatus) as refused:
        async with connect(url, **kwargs):  # type: ignore[arg-type]
            pass
    return refused.value.response.status_code


async def test_wrong_or_missing_token_and_bad_origin_are_refused_and_others_unaffected(tmp_path: Path) -> None:
    async with running_server(tmp_path) as server, ws_client(server.url) as good:
        with anyio.fail_after(DEADLINE):
            session = await good.start(tmp_path)
            assert await _refused(server.url) == 401
            assert await _refused(server.url, additional_headers=auth("wrong")) == 401
            assert await _refused(server.url, additional_headers={"Authorization": TOKEN}) == 401  # no scheme
            assert await _refused(server.url, additional_headers=auth(), origin="http://localhost:3000") == 403
            assert await _refused(server.url.replace("/acp", "/other"), additional_headers=auth()) == 404
            response = await good.request(
                "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "still here"}]}
            )
        assert response["result"]["stopReason"] == "end_turn"


async def test_an_allowed_origin_is_served(tmp_path: Path) -> None:
    async with running_server(tmp_path, args=["--allow-origin", "https://ide.example"]) as server:
        async with ws_client(server.url, origin="https://ide.example") as client:
            with anyio.fail_after(DEADLINE):
                await client.start(tmp_path)
        assert await _refused(server.url, additional_headers=auth(), origin="https://evil.example") == 403


async def test_an_oversized_frame_closes_that_connection_only(tmp_path: Path) -> None:
    async with running_server(tmp_path, args=["--max-frame", "65536"]) as server, ws_client(server.url) as good:
        with anyio.fail_after(DEADLINE):
            session = await good.start(tmp_path)
            async with ws_client(server.url) as bad:
                await bad.start(tmp_path)
                await bad.ws.send("x" * 100_000)
                with pytest.raises(ConnectionClosed):
                    while True:
                        await bad.ws.recv()
                assert bad.ws.close_code == 1009
            response = await good.request(
                "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "fine"}]}
            )
        assert response["result"]["stopReason"] == "end_turn"


async def test_connections_beyond_the_limit_are_refused(tmp_path: Path) -> None:
    async with running_server(tmp_path, args=["--max-connections", "2"]) as server:
        async with ws_client(server.url) as one, ws_client(server.url) as two:
            with anyio.fail_after(DEADLINE):
                await one.start(tmp_path)
                await two.start(tmp_path)
                assert await _refused(server.url, additional_headers=auth()) == 503
        with anyio.fail_after(DEADLINE):  # a closed connection frees its place
            while True:
                try:
                    async with ws_client(server.url) as three:
                        await three.start(tmp_path)
                    break
                except InvalidStatus:
                    await anyio.sleep(0.1)


async def test_twenty_concurrent_connections_with_prompts_in_flight(tmp_path: Path) -> None:
    async with running_server(tmp_path) as server:
        results: dict[int, str] = {}

        async def one(n: int) -> None:
            async with ws_client(server.url) as client:
                session = await client.start(tmp_path)
                response = await client.request(
                    "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": f"client {n}"}]}
                )
                assert response["result"]["stopReason"] == "end_turn", response
                chunks = [u for u in client.updates(session) if u["sessionUpdate"] == "agent_message_chunk"]
                results[n] = "".join(u["content"]["text"] for u in chunks)

        with anyio.fail_after(180):
            async with anyio.create_task_group() as group:
                for n in range(20):
                    group.start_soon(one, n)
        assert sorted(results) == list(range(20))
        for n, text in results.items():
            assert f"client {n}" in text  # each connection got its own reply, none of another's


async def test_a_client_that_drops_mid_turn_loads_its_session_on_reconnect(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    async with running_server(tmp_path, write_file_script(tmp_path)) as server:
        with anyio.fail_after(DEADLINE):
            async with ws_client(server.url) as first:
                session = await first.start(project)
                await first.ws.send(
                    json.dumps(
                        {
                            "jsonrpc": "2.0",
                            "id": 99,
                            "method": "session/prompt",
                            "params": {"sessionId": session, "prompt": [{"type": "text", "text": "remember me"}]},
                        }
                    )
                )
                while True:  # mid-turn: the permission request is pending when the client drops
                    message = json.loads(await first.ws.recv())
                    if message.get("method") == "session/request_permission":
                        break
            async with ws_client(server.url) as second:
                await second.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
                while True:  # the first connection's shutdown flushes the session; then it loads
                    loaded = await second.request(
                        "session/load", {"sessionId": session, "cwd": str(project), "mcpServers": []}
                    )
                    if "result" in loaded:
                        break
                    await anyio.sleep(0.1)
        replayed = second.updates(session)
        user = [u for u in replayed if u["sessionUpdate"] == "user_message_chunk"]
        assert any("remember me" in u["content"]["text"] for u in user), replayed
        assert any(u.get("toolCallId") == "w1" for u in replayed), replayed
        assert not (project / "hello.txt").exists()  # never allowed


@pytest.mark.timeout(240)  # a thousand connections one after another: minutes on a busy two-core machine
async def test_a_thousand_connects_are_bounded_and_the_server_still_serves(tmp_path: Path) -> None:
    async with running_server(tmp_path) as server:
        refused: list[int] = []

        async def knock() -> None:
            refused.append(await _refused(server.url, additional_headers=auth("nope")))

        with anyio.fail_after(180):
            for _ in range(20):
                async with anyio.create_task_group() as group:
                    for _ in range(50):
                        group.start_soon(knock)
            async with ws_client(server.url) as good:
                session = await good.start(tmp_path)
                response = await good.request(
                    "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "after"}]}
                )
        assert refused == [401] * 1000
        assert response["result"]["stopReason"] == "end_turn"


async def test_the_bridge_with_a_wrong_token_exits_1_and_writes_nothing_to_stdout(tmp_path: Path) -> None:
    async with running_server(tmp_path) as server:
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path), "DSH_SERVE_TOKEN": "wrong"}
        with anyio.fail_after(DEADLINE):
            result = await anyio.run_process(
                [sys.executable, "-m", "dsh", "bridge", server.url], env=env, check=False, input=b""
            )
        assert result.returncode == 1
        assert result.stdout == b""
        assert b"HTTP 401" in result.stderr


def test_the_bridge_tells_a_response_from_a_notification_by_the_message_not_its_text() -> None:
    """The bridge waits at end of input for answers to what it forwarded; ``initialize``'s answer names the
    steering method in its ``_meta``, and taking it for a notification left that wait to run out its grace."""

    def read(data: bytes) -> object:
        return answer_id(data[:512], data[-512:])

    assert read(b'{"jsonrpc":"2.0","result":{"_meta":{"x":{"method":"_dsh/session/steer"}}},"id":1}') == 1
    assert read(b'{"jsonrpc":"2.0","id":1,"result":{"_meta":{"x":{"method":"_dsh/session/steer"}}}}') == 1
    assert read(b'{"jsonrpc":"2.0","id":"a","error":{"code":-32602,"message":"method"}}') == "a"
    assert read(b'{"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{}}') is None
    assert read(b'{"jsonrpc":"2.0","method":"session/update","params":{"id":3}}') is None
