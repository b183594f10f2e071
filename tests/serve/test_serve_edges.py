"""``dsh serve``'s edges over a real WebSocket: the official SDK's own WebSocket transport, delegation off by
default (``--delegate`` to allow), the token file made at first start, the idle limit, a client that stops
reading (bounded, the others unaffected)."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from acp import connect_to_agent, text_block
from acp.schema import Implementation
from acp.ws import create_websocket_stream
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.support.editor import FS_WRITE, EditorClient, call, capabilities, write_script
from tests.support.env import sandbox_env
from tests.support.serve import auth, running_server, ws_client

DEADLINE = 60.0


async def _sdk_write(tmp_path: Path, args: list[str]) -> tuple[EditorClient, Path]:
    """The SDK's WebSocket transport runs a write_file turn (allowed once) with fs capabilities offered."""
    project = tmp_path / "project"
    project.mkdir()
    model = write_script(
        tmp_path / "script.json", [call("write_file", "w1", path="hello.txt", content="hello\n"), {"text": "done"}]
    )
    client = EditorClient(["allow_once"])
    async with running_server(tmp_path, model, args=args) as server:
        transport = await create_websocket_stream(server.url, headers=auth())
        conn = connect_to_agent(client, transport)
        try:
            with anyio.fail_after(DEADLINE):
                await conn.initialize(
                    protocol_version=1,
                    client_capabilities=capabilities(fs=True),
                    client_info=Implementation(name="serve-test", version="0"),
                )
                session = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
                response = await conn.prompt(session_id=session, prompt=[text_block("write it")])
            assert response.stop_reason == "end_turn"
        finally:
            await conn.close()
    assert len(client.permissions()) == 1
    return client, project


async def test_sdk_websocket_transport_and_no_delegation_by_default(tmp_path: Path) -> None:
    client, project = await _sdk_write(tmp_path, [])
    assert (project / "hello.txt").read_text(encoding="utf-8") == "hello\n"  # written on the server's machine
    assert FS_WRITE not in client.methods()  # the client's fs capability was withdrawn


async def test_delegate_lets_the_clients_fs_capability_through(tmp_path: Path) -> None:
    client, project = await _sdk_write(tmp_path, ["--delegate"])
    assert FS_WRITE in client.methods()
    assert not (project / "hello.txt").exists()  # the client wrote it (into its buffers)


async def test_the_token_file_is_made_at_first_start_with_mode_0600(tmp_path: Path) -> None:
    env = sandbox_env(tmp_path, "echo")
    token_file = Path(env["XDG_CONFIG_HOME"]) / "dsh" / "serve-token"
    assert not token_file.exists()
    async with running_server(tmp_path, env={"DSH_SERVE_TOKEN": ""}) as server:
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text(encoding="utf-8").strip()
        assert len(token) >= 40
        async with ws_client(server.url, additional_headers=auth(token)) as client:
            with anyio.fail_after(DEADLINE):
                await client.start(tmp_path)


def test_a_token_file_others_can_read_is_refused(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("secret-token\n", encoding="utf-8")
    token_file.chmod(0o644)
    env = {**sandbox_env(tmp_path, "echo"), "DSH_SERVE_TOKEN": ""}
    result = subprocess.run(
        [sys.executable, "-m", "dsh", "serve", "--listen", "127.0.0.1:0", "--token-file", str(token_file)],
        env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "can be read by others" in result.stderr


async def test_an_idle_connection_is_closed(tmp_path: Path) -> None:
    async with (
        running_server(tmp_path, args=["--idle-timeout", "1"]) as server,
        connect(server.url, additional_headers=auth()) as ws,
    ):
        with anyio.fail_after(DEADLINE), pytest.raises(ConnectionClosed):
            await ws.recv()
        assert ws.close_code == 1001


WORDS = 400_000
WINDOW = 3.0
"""Seconds the server's memory is watched while a client does not read: unbounded buffering of a 400,000-word
echo would hold well over the bound within it (the echo streams about 100,000 words a second here)."""


@pytest.mark.timeout(240)  # fills a socket buffer with megabytes of updates: slow on a busy two-core machine
async def test_a_client_that_stops_reading_is_bounded_and_others_are_served(tmp_path: Path) -> None:
    async with running_server(tmp_path) as server, connect(server.url, additional_headers=auth(), max_queue=1) as slow:

        async def request(request_id: int, method: str, params: dict[str, object]) -> None:
            await slow.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))

        with anyio.fail_after(DEADLINE):
            await request(1, "initialize", {"protocolVersion": 1})
            await slow.recv()
            await request(2, "session/new", {"cwd": str(tmp_path), "mcpServers": []})
            session = json.loads(await slow.recv())["result"]["sessionId"]
            while True:  # the session/new answer's notifications
                with anyio.move_on_after(0.5):
                    await slow.recv()
                    continue
                break
        baseline = _rss_kib(server.process.pid)
        words = " ".join(f"w{i}" for i in range(WORDS))
        await request(3, "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": words}]})
        # it reads nothing now: its writer fills, its model stream waits; another client is served meanwhile
        async with ws_client(server.url) as other:
            with anyio.fail_after(DEADLINE):
                other_session = await other.start(tmp_path)
                response = await other.request(
                    "session/prompt", {"sessionId": other_session, "prompt": [{"type": "text", "text": "hi"}]}
                )
            assert response["result"]["stopReason"] == "end_turn"
        peak = baseline
        with anyio.move_on_after(WINDOW):
            while True:
                peak = max(peak, _rss_kib(server.process.pid))
                await anyio.sleep(0.1)
        assert peak - baseline < 60_000, f"dsh serve grew by {peak - baseline} KiB for a client that does not read"
        chunks = 0
        with anyio.fail_after(120):  # nothing was lost: once it reads, the whole reply arrives, then the answer
            while True:
                message = json.loads(await slow.recv(decode=False))
                if message.get("id") == 3:
                    break
                if message.get("params", {}).get("update", {}).get("sessionUpdate") == "agent_message_chunk":
                    chunks += 1
        assert message["result"]["stopReason"] == "end_turn"
        assert chunks == WORDS


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0
