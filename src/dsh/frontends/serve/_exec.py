"""``dsh exec --connect URL``: one task on a remote ``dsh serve``, for CI and scripts (RFC 0038).

Guarantees:

* The same contract as a local ``dsh exec`` where it applies: the final answer on stdout (``--json``: one
  ``result`` line, the local run's keys, ``filesChanged`` empty: the server's files are not seen from here),
  progress on stderr, exit 0 when the turn ended ``end_turn`` with no tool call refused, 1 otherwise (a refused
  tool call, failed, cancelled, the connection lost), 130 interrupted.
* Nobody is there to approve: a permission request is answered ``allow_once`` only as the ``--allow-*`` flags
  allow (``--allow-all`` everything, ``--allow-edits`` edits, ``--allow-reads`` reads and searches); every
  other request is answered ``reject_once`` and listed in ``denied``.
* ``--cwd`` is a directory on the server; ``--session ID`` loads a stored session of the server; ``--timeout``
  sends ``session/cancel`` and then ends 1.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any

import anyio

__all__ = ["RemoteExec", "run_remote_exec"]

_EDIT_KINDS = {"edit", "delete", "move"}
_READ_KINDS = {"read", "search"}


@dataclass(frozen=True)
class RemoteExec:
    url: str
    task: str
    cwd: str
    json: bool = False
    session: str | None = None
    mode: str | None = None
    timeout: float | None = None
    allow_reads: bool = False
    allow_edits: bool = False
    allow_all: bool = False

    def allows(self, kind: str | None) -> bool:
        if self.allow_all:
            return True
        if self.allow_edits and kind in _EDIT_KINDS:
            return True
        return (self.allow_reads or self.allow_edits) and kind in _READ_KINDS


def _option(options: list[dict[str, Any]], kind: str) -> str | None:
    for option in options:
        if option.get("kind") == kind:
            return str(option.get("optionId"))
    return None


async def _run(run: RemoteExec, token: str | None) -> int:
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed, InvalidStatus

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        ws = await connect(run.url, additional_headers=headers, max_size=None, compression=None, open_timeout=30)
    except InvalidStatus as exc:
        sys.stderr.write(f"dsh exec: {run.url} refused the connection (HTTP {exc.response.status_code})\n")
        return 1
    except (OSError, TimeoutError) as exc:
        sys.stderr.write(f"dsh exec: cannot reach {run.url}: {exc}\n")
        return 1
    ids = iter(range(1, 1 << 31))
    text: list[str] = []
    denied: list[str] = []
    result: dict[str, Any] = {"stopReason": "error"}
    session_id: str | None = run.session

    async def send(message: dict[str, Any]) -> None:
        await ws.send(json.dumps({"jsonrpc": "2.0", **message}, separators=(",", ":")))

    async def request(method: str, params: dict[str, Any]) -> dict[str, Any]:
        my_id = next(ids)
        await send({"id": my_id, "method": method, "params": params})
        while True:
            message = json.loads(await ws.recv(decode=False))
            if "method" in message:
                await on_message(message)
            elif message.get("id") == my_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error'].get('message')}")
                return dict(message.get("result") or {})

    async def on_message(message: dict[str, Any]) -> None:
        method, params = message["method"], message.get("params") or {}
        if method == "session/update":
            update = params.get("update") or {}
            kind = update.get("sessionUpdate")
            if kind == "agent_message_chunk" and (update.get("content") or {}).get("type") == "text":
                text.append(update["content"]["text"])
            elif kind == "tool_call":
                sys.stderr.write(f"dsh exec: {update.get('title') or update.get('toolCallId')}\n")
        elif method == "session/request_permission" and "id" in message:
            call = params.get("toolCall") or {}
            allowed = run.allows(call.get("kind"))
            option = _option(params.get("options") or [], "allow_once" if allowed else "reject_once")
            if not allowed:
                denied.append(str(call.get("title") or call.get("toolCallId")))
            outcome = {"outcome": "selected", "optionId": option} if option else {"outcome": "cancelled"}
            await send({"id": message["id"], "result": {"outcome": outcome}})
        elif "id" in message:  # fs/*, terminal/*: this client offers none
            await send({"id": message["id"], "error": {"code": -32601, "message": "method not found"}})

    code = 1
    try:
        await request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        if session_id is None:
            session_id = str((await request("session/new", {"cwd": run.cwd, "mcpServers": []}))["sessionId"])
        else:
            await request("session/load", {"sessionId": session_id, "cwd": run.cwd, "mcpServers": []})
            text.clear()  # the replayed history is not this run's answer
        if run.mode is not None:
            await request("session/set_mode", {"sessionId": session_id, "modeId": run.mode})
        prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": run.task}]}
        timed_out = False
        with anyio.move_on_after(run.timeout if run.timeout is not None else float("inf")) as scope:
            result = await request("session/prompt", prompt)
        if scope.cancelled_caught:
            timed_out = True
            await send({"method": "session/cancel", "params": {"sessionId": session_id}})
            with anyio.move_on_after(10):
                while True:
                    message = json.loads(await ws.recv(decode=False))
                    if "method" in message:
                        await on_message(message)
                    elif "result" in message and isinstance(message["result"], dict):
                        result = message["result"]
                        break
            sys.stderr.write(f"dsh exec: --timeout {run.timeout:g} s reached; the turn was cancelled\n")
        code = 0 if result.get("stopReason") == "end_turn" and not timed_out and not denied else 1
    except ConnectionClosed:
        sys.stderr.write(f"dsh exec: the server closed the connection ({ws.close_code} {ws.close_reason})\n")
        result = {"stopReason": "error", "error": "connection closed"}
    except RuntimeError as exc:
        sys.stderr.write(f"dsh exec: {exc}\n")
        result = {"stopReason": "error", "error": str(exc)}
    finally:
        await ws.close()
    answer = "".join(text)
    if run.json:
        line = {"type": "result", "stopReason": result.get("stopReason"), "text": answer}
        line |= {"usage": result.get("usage") or {}, "cost": None, "sessionId": session_id}
        line |= {"filesChanged": [], "denied": denied, "steps": None}
        if "error" in result:
            line["error"] = result["error"]
        sys.stdout.write(json.dumps(line, separators=(",", ":")) + "\n")
    elif answer:
        sys.stdout.write(answer if answer.endswith("\n") else answer + "\n")
    sys.stdout.flush()
    if denied:
        sys.stderr.write(f"dsh exec: refused (no --allow-* flag allows it): {', '.join(denied)}\n")
    elif code and result.get("stopReason") not in ("error", None):
        sys.stderr.write(f"dsh exec: the turn ended {result.get('stopReason')}\n")
    return code


def run_remote_exec(run: RemoteExec) -> int:
    from dsh.frontends.serve._token import client_token

    try:
        return anyio.run(_run, run, client_token())
    except KeyboardInterrupt:
        return 130
