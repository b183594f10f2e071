"""A misbehaving language server for the bound tests: ``python fake_server.py MODE``.

* ``hang``: reads its input and never writes a byte.
* ``crash``: exits at once.
* ``silent``: answers ``initialize`` and never publishes a diagnostic.
* ``cascade``: answers ``initialize``; on every ``didChange`` publishes an error for ``other.py`` beside the changed
  file (then the changed file's own, empty, diagnostics); on ``didOpen`` only the opened file's (empty).
* ``flood``: answers ``initialize``, then writes diagnostics for other files without end (and a huge message).
* ``gated GATE``: answers ``initialize`` only once the file GATE exists (a server still starting, for as long as
  the test wants), then publishes each opened or changed document's (empty) diagnostics.
* ``probe OUTSIDE``: answers ``initialize``; on every ``didOpen``/``didChange`` publishes one error saying what
  it could do: ``outside=wrote|denied`` (a file in the directory OUTSIDE), ``inside=wrote|denied`` (a file in its
  working directory, the workspace), ``key=present|absent`` (``OPENAI_API_KEY`` in its environment),
  ``net=open|cut`` (a TCP connection to 127.0.0.1 on the port ``LSP_PROBE_PORT`` names).
* ``strict OUTSIDE``: exits at once (before ``initialize``) unless it can write a file in OUTSIDE, as a server
  does whose cache lives outside the workspace.
"""

from __future__ import annotations

import json
import os
import sys
import time


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


def can_write(directory: str) -> str:
    try:
        with open(os.path.join(directory, f"probe-{os.getpid()}.txt"), "w") as handle:
            handle.write("written by a language server\n")
    except OSError:
        return "denied"
    return "wrote"


def can_connect() -> str:
    import socket

    try:
        socket.create_connection(("127.0.0.1", int(os.environ.get("LSP_PROBE_PORT", "9"))), timeout=5).close()
    except OSError:
        return "cut"
    return "open"


def publish_empty(message: dict[str, object]) -> None:
    document = message["params"]["textDocument"]  # type: ignore[index]
    send(
        {
            "jsonrpc": "2.0",
            "method": "textDocument/publishDiagnostics",
            "params": {"uri": document["uri"], "version": document["version"], "diagnostics": []},
        }
    )


def main(mode: str, argument: str = "") -> None:
    if mode == "crash":
        sys.exit(3)
    if mode == "strict" and can_write(argument) != "wrote":
        sys.exit(4)
    while True:
        message = read()
        if message is None:
            return
        if mode == "hang":
            continue
        method = message.get("method")
        if method == "initialize" and mode == "gated":
            while not os.path.exists(argument):  # a test's gate: another process's file
                time.sleep(0.01)
        if mode in ("gated", "strict") and method in ("textDocument/didOpen", "textDocument/didChange"):
            publish_empty(message)
        if mode == "probe" and method in ("textDocument/didOpen", "textDocument/didChange"):
            document = message["params"]["textDocument"]  # type: ignore[index]
            key = "present" if "OPENAI_API_KEY" in os.environ else "absent"
            said = f"outside={can_write(argument)} inside={can_write('.')} key={key} net={can_connect()}"
            diagnostic = {
                "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}},
                "message": said,
                "severity": 1,
                "source": "probe",
            }
            send(
                {
                    "jsonrpc": "2.0",
                    "method": "textDocument/publishDiagnostics",
                    "params": {"uri": document["uri"], "version": document["version"], "diagnostics": [diagnostic]},
                }
            )
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
    main(*sys.argv[1:3])
