"""A misbehaving language server for the bound tests: ``python fake_server.py MODE``.

* ``hang``: reads its input and never writes a byte.
* ``crash``: exits at once.
* ``silent``: answers ``initialize`` and never publishes a diagnostic.
* ``cascade``: answers ``initialize``; on every ``didChange`` publishes an error for ``other.py`` beside the changed
  file (then the changed file's own, empty, diagnostics); on ``didOpen`` only the opened file's (empty).
* ``flood``: answers ``initialize``, then writes diagnostics for other files without end (and a huge message).
"""

from __future__ import annotations

import json
import sys


def send(message: dict[str, object]) -> None:
    body = json.dumps(message).encode()
    sys.stdout.buffer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    sys.stdout.buffer.flush()


def read() -> dict[str, object] | None:
    length = 0
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    return json.loads(sys.stdin.buffer.read(length))  # type: ignore[no-any-return]


def main(mode: str) -> None:
    if mode == "crash":
        sys.exit(3)
    while True:
        message = read()
        if message is None:
            return
        if mode == "hang":
            continue
        method = message.get("method")
        if mode == "cascade" and method in ("textDocument/didOpen", "textDocument/didChange"):
            document = message["params"]["textDocument"]  # type: ignore[index]
            uri, version = document["uri"], document["version"]
            if method == "textDocument/didChange":
                other = uri.rsplit("/", 1)[0] + "/other.py"
                diagnostic = {
                    "range": {"start": {"line": 4, "character": 0}, "end": {"line": 4, "character": 1}},
                    "message": f"broken by version {version}",
                    "severity": 1,
                }
                send(
                    {
                        "jsonrpc": "2.0",
                        "method": "textDocument/publishDiagnostics",
                        "params": {"uri": other, "diagnostics": [diagnostic]},
                    }
                )
            send(
                {
                    "jsonrpc": "2.0",
                    "method": "textDocument/publishDiagnostics",
                    "params": {"uri": uri, "version": version, "diagnostics": []},
                }
            )
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": message["id"], "result": {"capabilities": {}}})
            if mode == "flood":
                n = 0
                while True:
                    n += 1
                    diagnostic = {
                        "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}},
                        "message": "x" * 1000,
                        "severity": 1,
                    }
                    send(
                        {
                            "jsonrpc": "2.0",
                            "method": "textDocument/publishDiagnostics",
                            "params": {"uri": f"file:///elsewhere/{n}.py", "diagnostics": [diagnostic] * 50},
                        }
                    )


if __name__ == "__main__":
    main(sys.argv[1])
