"""``dsh bridge URL``: stdin/stdout ↔ a ``dsh serve`` WebSocket, so any stdio ACP client reaches a remote dsh.

Guarantees:

* Each line on stdin is sent as one text message, in order; each message received is written to stdout as one
  line, in order. Nothing else is ever written to stdout (messages go to stderr), but for the answer to a line
  over the cap (``max_frame``, :data:`dsh.jsonrpc.MAX_LINE` by default): it is never sent (the server would
  close the connection on it) and is answered here as ``dsh acp`` answers it on stdio (:func:`~dsh.jsonrpc.too_large`,
  ``id: null``); the connection goes on.
* The token is ``--token-file``'s, else ``DSH_SERVE_TOKEN``, else the default token file; it travels only in
  the ``Authorization`` header.
* End of stdin closes the connection (1000) once the requests already sent are answered (at most
  :data:`EOF_GRACE` later) and exits 0; the server closing or refusing the connection exits 1
  with one line on stderr saying why (HTTP status, close code).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from pathlib import Path
from typing import BinaryIO

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel

from dsh.jsonrpc import MAX_LINE, LineFramer, Oversized, answer_id, too_large

__all__ = ["bridge", "run_bridge"]

EOF_GRACE = 30.0
"""Seconds the bridge waits, after the end of stdin, for answers to requests already sent."""


def _stdin_lines(
    send: anyio.abc.ObjectSendStream[bytes | Oversized], token: anyio.lowlevel.EventLoopToken, max_line: int
) -> None:
    """Read stdin in a daemon thread (a blocked read never holds the loop or the exit), framed as the daemon
    frames its stdin (:class:`~dsh.jsonrpc.LineFramer`); b"" at its end."""
    framer = LineFramer(max_line)
    try:
        while True:
            try:
                chunk = os.read(sys.stdin.fileno(), 1 << 16)
            except OSError:
                chunk = b""
            for line in framer.feed(chunk) if chunk else framer.close():
                if isinstance(line, Oversized) or line.strip():
                    anyio.from_thread.run(
                        send.send, line.rstrip(b"\r") if isinstance(line, bytes) else line, token=token
                    )
            if not chunk:
                break
        anyio.from_thread.run(send.send, b"", token=token)
    except Exception:  # the loop is gone
        return


async def bridge(url: str, token: str | None, *, max_frame: int = MAX_LINE) -> int:
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed, InvalidStatus

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    out = _stdout()
    try:
        ws = await connect(url, additional_headers=headers, max_size=max_frame, compression=None, open_timeout=30)
    except InvalidStatus as exc:
        status = exc.response.status_code
        body = exc.response.body.decode("utf-8", "replace").strip()
        sys.stderr.write(f"dsh bridge: {url} refused the connection (HTTP {status}: {body})\n")
        return 1
    except (OSError, TimeoutError) as exc:
        sys.stderr.write(f"dsh bridge: cannot reach {url}: {exc}\n")
        return 1
    lines_send, lines_receive = anyio.create_memory_object_stream[bytes | Oversized](64)
    code = 0
    pending: set[object] = set()  # ids of the client's requests not yet answered
    answered = anyio.Event()
    async with anyio.create_task_group() as group:

        async def upstream() -> None:
            async for line in lines_receive:
                if isinstance(line, Oversized):  # never sent: answered here as the daemon answers it on stdio
                    error = too_large(line.size, line.limit).to_json()
                    out.write(json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode() + b"\n")
                    flush()
                    continue
                if not line:
                    break
                request_id = _request_id(line)
                if request_id is not None:
                    pending.add(request_id)
                try:
                    await ws.send(line, text=True)
                except ConnectionClosed:
                    return
            with anyio.move_on_after(EOF_GRACE):  # what was asked before the end of input is still answered
                while pending:
                    await answered.wait()
            await ws.close(1000)

        loop = asyncio.get_running_loop()
        flush_scheduled = False

        def flush() -> None:
            nonlocal flush_scheduled
            flush_scheduled = False
            try:
                out.flush()
            except OSError:  # the client went away: the end of stdin follows
                pass

        async def downstream() -> None:
            nonlocal code, answered, flush_scheduled
            try:
                while True:
                    data = await ws.recv(decode=False)  # the frame's bytes: no decode and encode again
                    if pending:  # read from the message's ends, never parsed (a session/update may be large)
                        answered_id = answer_id(data[:512], data[-512:])
                        if answered_id is not None:
                            pending.discard(answered_id)
                            answered.set()
                            answered = anyio.Event()
                    out.write(data + b"\n")
                    if not flush_scheduled:  # one flush per burst: after the messages already received
                        flush_scheduled = True
                        loop.call_soon(flush)
            except ConnectionClosed:
                pass
            flush()
            if ws.close_code not in (None, 1000, 1001):
                sys.stderr.write(f"dsh bridge: the server closed the connection ({ws.close_code} {ws.close_reason})\n")
                code = 1
            group.cancel_scope.cancel()

        group.start_soon(downstream)
        group.start_soon(upstream)
        threading.Thread(
            target=_stdin_lines,
            args=(lines_send, anyio.lowlevel.current_token(), max_frame),
            name="dsh-bridge",
            daemon=True,
        ).start()
    return code


def _stdout() -> BinaryIO:
    """fd 1 with a large buffer: messages are written as they come and flushed once per burst."""
    return open(sys.stdout.fileno(), "wb", buffering=1 << 20, closefd=False)


def _request_id(line: bytes) -> object | None:
    """The id of a request (not a notification, not a response) on *line*, else None."""
    if b'"id"' not in line or b'"method"' not in line:
        return None
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return _hashable(message.get("id")) if isinstance(message, dict) and "method" in message else None


def _hashable(value: object) -> object | None:
    return value if isinstance(value, (int, str)) else None


def token_for(token_file: str | None) -> str | None:
    from dsh.frontends.serve._token import client_token

    if token_file is not None:
        return Path(token_file).read_text(encoding="utf-8").strip()
    return client_token()


def run_bridge(url: str, token_file: str | None) -> int:
    try:
        token = token_for(token_file)
    except OSError as exc:
        sys.stderr.write(f"dsh bridge: cannot read the token: {exc}\n")
        return 2
    try:
        return anyio.run(bridge, url, token)
    except KeyboardInterrupt:
        return 130
    finally:
        sys.stderr.flush()
