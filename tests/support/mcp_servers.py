"""Real MCP servers, written with the official SDK's server side (FastMCP), for the MCP tests.

* ``python -m tests.support.mcp_servers stdio <dir>`` — the stdio server. Tools: ``echo``, ``add``, ``slow``
  (sleeps; records ``slow-started`` and, when it is cancelled, ``slow-cancelled`` in *dir*), ``fail`` (raises:
  an ``isError`` result), ``image`` (a PNG), ``lookup`` (annotated read-only), ``grow`` (adds the tool ``extra``
  and sends ``notifications/tools/list_changed``), ``crash`` (the process exits mid-call). It writes its pid to
  ``<dir>/pid-<n>`` at start (n counts starts, so a restart is visible).
* ``python -m tests.support.mcp_servers hang`` — a process that reads stdin and never answers (a handshake that
  hangs).
* :func:`serve_http` — a streamable-HTTP (``/mcp``) or SSE (``/sse``) server on 127.0.0.1 in a thread of the
  test process, with the tool ``ping``; yields its URL.

No ``from __future__ import annotations`` here: FastMCP reads the tools' annotations at run time.
"""

import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["PNG", "hang_server", "serve_http", "stdio_server"]

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000100ffff03000006000557bfabd40000000049454e44ae426082"
)


def stdio_server(directory: str, name: str = "main") -> dict[str, Any]:
    """The ACP ``McpServerStdio`` entry (as JSON) that starts the stdio server writing into *directory*."""
    return {
        "name": name,
        "command": sys.executable,
        "args": ["-m", "tests.support.mcp_servers", "stdio", directory],
        "env": [{"name": "PYTHONPATH", "value": str(Path(__file__).resolve().parents[2])}],
    }


def hang_server(name: str = "stuck") -> dict[str, Any]:
    return {
        "name": name,
        "command": sys.executable,
        "args": ["-c", "import sys, time\nfor _ in sys.stdin: time.sleep(3600)"],
        "env": [],
    }


def _mark(directory: Path, name: str, text: str = "") -> None:
    (directory / name).write_text(text, encoding="utf-8")


def _run_stdio(directory: Path) -> None:
    import anyio
    from mcp.server.fastmcp import Context, FastMCP, Image
    from mcp.types import ToolAnnotations

    starts = len(list(directory.glob("pid-*"))) + 1
    _mark(directory, f"env-{starts}", json.dumps(dict(os.environ)))  # what dsh let the server see
    _mark(directory, f"pid-{starts}", str(os.getpid()))
    server = FastMCP("dsh-test")

    @server.tool(description="Echo the text back.")
    def echo(text: str) -> str:
        return f"echo: {text}"

    @server.tool(description="Add two integers.")
    def add(a: int, b: int) -> int:
        return a + b

    @server.tool(description="Sleep for a while (records its start and its cancellation).")
    async def slow(seconds: float = 30.0) -> str:
        _mark(directory, "slow-started")
        try:
            await anyio.sleep(seconds)
        except BaseException:
            _mark(directory, "slow-cancelled")
            raise
        return "slept"

    @server.tool(description="Always fails.")
    def fail(message: str = "boom") -> str:
        raise ValueError(message)

    @server.tool(description="Return a tiny PNG image.")
    def image() -> Image:
        return Image(data=PNG, format="png")

    @server.tool(description="Look a key up (read-only).", annotations=ToolAnnotations(readOnlyHint=True))
    def lookup(key: str) -> str:
        return f"value of {key}"

    @server.tool(description="Add the tool `extra` and announce it.")
    async def grow(ctx: Context) -> str:  # type: ignore[type-arg]
        def extra() -> str:
            return "extra works"

        server.add_tool(extra, name="extra", description="Added by grow.")
        await ctx.session.send_tool_list_changed()
        return "grown"

    @server.tool(description="Exit the server process in the middle of the call.")
    def crash() -> str:
        sys.stderr.write("crash: exiting on purpose\n")
        sys.stderr.flush()
        os._exit(3)

    server.run("stdio")


@contextmanager
def serve_http(transport: str = "streamable-http", *, filesystem_tools: bool = False) -> Iterator[str]:
    """Serve a FastMCP app with the tool ``ping`` on 127.0.0.1 (a free port) in a thread; yield its URL. With
    *filesystem_tools*, also ``write_file``, ``move_file`` and ``read_text_file`` annotated as the reference
    filesystem server annotates them (they only echo: nothing is written)."""
    import socket

    import uvicorn
    from mcp.server.fastmcp import FastMCP
    from mcp.types import ToolAnnotations

    server = FastMCP(f"dsh-test-{transport}", host="127.0.0.1")

    @server.tool(description="Answer pong.")
    def ping(text: str = "") -> str:
        return f"pong over {transport}: {text}"

    if filesystem_tools:
        writes = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True)
        moves = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False)

        @server.tool(description="Create or overwrite a file.", annotations=writes)
        def write_file(path: str, content: str) -> str:
            return f"wrote {len(content)} characters to {path}"

        @server.tool(description="Move or rename a file.", annotations=moves)
        def move_file(source: str, destination: str) -> str:
            return f"moved {source} to {destination}"

        @server.tool(description="Read a file.", annotations=ToolAnnotations(readOnlyHint=True))
        def read_text_file(path: str) -> str:
            return f"contents of {path}"

    app = server.streamable_http_app() if transport == "streamable-http" else server.sse_app()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    runner = uvicorn.Server(config)
    thread = threading.Thread(target=runner.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not runner.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError(f"the {transport} MCP server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}/mcp" if transport == "streamable-http" else f"http://127.0.0.1:{port}/sse"
    finally:
        runner.should_exit = True
        thread.join(5)
        sock.close()


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        _run_stdio(Path(sys.argv[2]))
    elif sys.argv[1] == "hang":
        for _ in sys.stdin:
            time.sleep(3600)
