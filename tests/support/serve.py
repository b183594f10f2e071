"""A real ``dsh serve`` on 127.0.0.1 (port 0: the kernel picks one) for over-the-wire tests, and a plain
WebSocket ACP client of our own.

:func:`running_server` spawns ``python -m dsh serve --listen 127.0.0.1:0`` with the sandbox environment and a
known token, waits for its "listening on" line (hang detection: 60 s), yields the ``/acp`` URL; at the end it
sends SIGTERM and requires exit 0."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from websockets.asyncio.client import ClientConnection, connect

from tests.support.env import sandbox_env

TOKEN = "test-token-0123456789"
START_DEADLINE = 60.0


@dataclass
class Server:
    url: str
    stderr_path: Path
    process: asyncio.subprocess.Process

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")


@asynccontextmanager
async def running_server(
    tmp_path: Path, model: str = "echo", *, args: Sequence[str] = (), env: Mapping[str, str] | None = None
) -> AsyncIterator[Server]:
    environment = {**sandbox_env(tmp_path, model), "DSH_SERVE_TOKEN": TOKEN, **(env or {})}
    stderr_path = tmp_path / "serve.stderr.log"
    with stderr_path.open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "dsh", "serve", "--listen", "127.0.0.1:0", *args,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=stderr,
            env=environment, cwd=str(tmp_path),
        )  # fmt: skip
    try:
        url = None
        with anyio.fail_after(START_DEADLINE):
            while url is None:
                found = re.search(r"listening on (ws://\S+)", stderr_path.read_text(encoding="utf-8", errors="replace"))
                if found:
                    url = found.group(1)
                elif process.returncode is not None:
                    raise AssertionError(f"dsh serve exited {process.returncode}: {stderr_path.read_text()}")
                else:
                    await anyio.sleep(0.05)
        server = Server(url, stderr_path, process)
        yield server
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
            code = None
            with anyio.move_on_after(30):
                code = await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
    assert code == 0, f"dsh serve exited {code}; stderr:\n{stderr_path.read_text()[-3000:]}"


def auth(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@dataclass
class WsClient:
    """A plain JSON-RPC client over one WebSocket: requests by id, every message kept in arrival order."""

    ws: ClientConnection
    messages: list[dict[str, Any]] = field(default_factory=list)
    next_id: int = 0

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a request; return its response, answering ``session/request_permission`` with *allow_once*."""
        self.next_id += 1
        my_id = self.next_id
        await self.ws.send(json.dumps({"jsonrpc": "2.0", "id": my_id, "method": method, "params": params}))
        while True:
            message = json.loads(await self.ws.recv())
            self.messages.append(message)
            if message.get("id") == my_id and "method" not in message:
                return message
            if message.get("method") == "session/request_permission":
                await self.ws.send(
                    json.dumps(
                        {
                            "jsonrpc": "2.0",
                            "id": message["id"],
                            "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}},
                        }
                    )
                )

    async def start(self, cwd: Path) -> str:
        init = await self.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        assert init["result"]["protocolVersion"] == 1, init
        new = await self.request("session/new", {"cwd": str(cwd), "mcpServers": []})
        return str(new["result"]["sessionId"])

    def updates(self, session_id: str) -> list[dict[str, Any]]:
        return [
            m["params"]["update"]
            for m in self.messages
            if m.get("method") == "session/update" and m["params"]["sessionId"] == session_id
        ]


@asynccontextmanager
async def ws_client(url: str, **kwargs: Any) -> AsyncIterator[WsClient]:
    kwargs.setdefault("additional_headers", auth())
    async with connect(url, **kwargs) as ws:
        yield WsClient(ws)
