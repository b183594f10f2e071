"""A hostile ACP agent for the chat's exit tests: it answers ``initialize`` and ``session/new``, then answers a
``session/prompt`` with a flood of ``agent_message_chunk`` updates that never ends, ignores ``session/cancel``,
and never answers the prompt. Raw JSON-RPC on stdin/stdout, no SDK (it must not be polite by accident).

Run: ``python tests/support/flood_agent.py``.
"""

from __future__ import annotations

import json
import sys
import threading
import time


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def flood(session_id: str) -> None:
    number = 0
    while True:
        number += 1
        text = f"flood{number} " * 20 + "\n"
        update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
        send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session_id, "update": update}})
        time.sleep(0.001)


def main() -> None:
    for line in sys.stdin:
        message = json.loads(line)
        method, ident = message.get("method"), message.get("id")
        if method == "initialize":
            result = {"protocolVersion": 1, "agentCapabilities": {}, "agentInfo": {"name": "flood", "version": "0"}}
            send({"jsonrpc": "2.0", "id": ident, "result": result})
        elif method == "session/new":
            send({"jsonrpc": "2.0", "id": ident, "result": {"sessionId": "flood-session"}})
        elif method == "session/prompt":
            threading.Thread(target=flood, args=("flood-session",), daemon=True).start()
        # session/cancel and everything else: ignored


if __name__ == "__main__":
    main()
