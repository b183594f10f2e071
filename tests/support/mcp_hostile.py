"""A hostile MCP server speaking raw JSON-RPC over stdio (no SDK: it must be able to send what the SDK would
never send), for the issue #30 tests.

``python -m tests.support.mcp_hostile <dir> [flags]`` — writes its pid to ``<dir>/pid``. Flags:

* ``--duplicate``: ``tools/list`` lists ``first``, ``dup``, ``dup``, ``later``, ``last`` (the duplicate in the
  middle).
* ``--stderr-key``: prints ``$HOSTILE_KEY`` on stderr (plain, in a sentence) once initialized.
* ``--flood SECONDS``: once initialized, writes to stdout and to stderr without a newline for that long, then
  writes ``<dir>/flooded`` and serves normally (the flood is garbage on an unfinished line).

Tools, always listed (besides the duplicates above): ``ok`` (answers ``ok``), ``deep`` (a result nested
``depth`` deep in ``structuredContent``), ``big`` (a text of ``size`` bytes), ``spawn`` (starts a grandchild that
calls ``setsid`` and sleeps; its pid in ``<dir>/grandchild``), ``echo`` (the ``text`` argument back).
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["hostile_server"]


def hostile_server(directory: str, *flags: str, name: str = "bad") -> dict[str, Any]:
    """The ACP ``McpServerStdio`` entry (as JSON) that starts this server."""
    return {
        "name": name,
        "command": sys.executable,
        "args": ["-m", "tests.support.mcp_hostile", directory, *flags],
        "env": [{"name": "PYTHONPATH", "value": str(Path(__file__).resolve().parents[2])}],
    }


def _tool(name: str) -> dict[str, Any]:
    return {"name": name, "description": f"The {name} tool.", "inputSchema": {"type": "object"}}


def _send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _flood(seconds: float, directory: Path) -> None:
    junk = b"x" * 65536
    end = time.monotonic() + seconds
    out, err = sys.stdout.buffer, sys.stderr.buffer
    while time.monotonic() < end:
        out.write(junk)
        out.flush()
        err.write(junk)
        err.flush()
    out.write(b"\n")
    out.flush()
    err.write(b"\n")
    err.flush()
    (directory / "flooded").write_text("done")


def _call(name: str, arguments: dict[str, Any], directory: Path) -> dict[str, Any]:
    if name == "deep":
        value: Any = "bottom"
        for _ in range(int(arguments.get("depth", 200))):
            value = [value]
        return {"content": [{"type": "text", "text": "deep"}], "structuredContent": {"v": value}}
    if name == "big":
        size = int(arguments.get("size", 50_000_000))
        return {"content": [{"type": "text", "text": "B" * size}]}
    if name == "spawn":
        child = subprocess.Popen(
            [sys.executable, "-c", "import os, time\nos.setsid()\ntime.sleep(600)"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        (directory / "grandchild").write_text(str(child.pid))
        return {"content": [{"type": "text", "text": f"spawned {child.pid}"}]}
    if name == "echo":
        return {"content": [{"type": "text", "text": str(arguments.get("text", ""))}]}
    return {"content": [{"type": "text", "text": "ok"}]}


def main(argv: list[str]) -> None:
    directory = Path(argv[0])
    flags = argv[1:]
    (directory / "pid").write_text(str(os.getpid()))
    names = ["ok", "deep", "big", "spawn", "echo"]
    if "--duplicate" in flags:
        names = ["first", "dup", "dup", "later", *names, "last"]
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        method, ident = message.get("method"), message.get("id")
        if method == "initialize":
            _send(
                {
                    "jsonrpc": "2.0",
                    "id": ident,
                    "result": {
                        "protocolVersion": message["params"].get("protocolVersion", "2025-06-18"),
                        "capabilities": {"tools": {"listChanged": False}},
                        "serverInfo": {"name": "hostile", "version": "0"},
                    },
                }
            )
        elif method == "notifications/initialized":
            if "--stderr-key" in flags:
                sys.stderr.write(f"starting with key {os.environ.get('HOSTILE_KEY', '')} loaded\n")
                sys.stderr.flush()
            if "--flood" in flags:
                _flood(float(flags[flags.index("--flood") + 1]), directory)
        elif method == "tools/list":
            _send({"jsonrpc": "2.0", "id": ident, "result": {"tools": [_tool(n) for n in names]}})
        elif method == "tools/call":
            params = message.get("params") or {}
            result = _call(str(params.get("name")), params.get("arguments") or {}, directory)
            _send({"jsonrpc": "2.0", "id": ident, "result": result})
        elif ident is not None and method is not None:
            _send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": f"no {method}"}})


if __name__ == "__main__":
    main(sys.argv[1:])
