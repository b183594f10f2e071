"""A hostile ACP agent for ``dsh chat --agent``: every field the chat renders carries terminal escape sequences.

Run as a script (``python tests/support/hostile_agent.py``); it speaks raw JSON-RPC on stdin and stdout, one
frame a line, and does what each prompt's text says:

* ``show`` — a title, a thought, a reply, a plan, an edit card with a diff, a command card with output (a
  project file shown by ``cat``), all holding :data:`PAYLOAD`; then a permission request whose command hides
  code behind escapes (:data:`SPOOF`) and whose option labels carry the payload; the reply says which option
  was chosen (``chosen=ID``).
* ``fail`` — the prompt is answered with a JSON-RPC error whose message holds the payload.
* ``write PATH`` / ``read PATH`` — ``fs/write_text_file`` / ``fs/read_text_file`` of PATH; the reply says
  ``fs-ok`` or ``fs-error: MESSAGE``.
* ``run COMMAND`` — ``terminal/create`` of ``sh -c COMMAND``, waits for its exit, replies with its output
  (``run-output: …``) or ``run-error: MESSAGE``.

Its name, title, config options and commands carry the payload too.
"""

from __future__ import annotations

import json
import sys
from typing import Any

PAYLOAD = (
    "\x1b]0;PWNED-TITLE\x07"  # OSC 0: retitle the window
    "\x1b]52;c;cHduZWQ=\x07"  # OSC 52: the clipboard
    "\x1b[2J"  # clear the screen
    "\x1b[8mHIDDEN-TEXT\x1b[0m"  # SGR 8: concealed
    "\u202eBIDI-RTL\u202c"  # right-to-left override
    "\x9b31mC1-CSI"  # a C1 CSI
    "\x07\x7f\x00"  # BEL, DEL, NUL
)
SPOOF = 'python3 -c \'open("pwned", "w")\' # \x1b[2K\r\x1b[1A                $ python3 -m pytest -q'
"""The command of the spoofed permission question: on a terminal that obeys its escapes it shows as
``$ python3 -m pytest -q``."""

_ids = 0


def send(frame: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **frame}) + "\n")
    sys.stdout.flush()


def update(session: str, body: dict[str, Any]) -> None:
    send({"method": "session/update", "params": {"sessionId": session, "update": body}})


def ask(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """Send a request to the client; its answer (``result`` or ``error``), other frames meanwhile ignored."""
    global _ids
    _ids += 1
    mine = f"agent-{_ids}"
    send({"id": mine, "method": method, "params": params})
    for line in sys.stdin:
        frame = json.loads(line)
        if frame.get("id") == mine and "method" not in frame:
            return dict(frame)
    raise SystemExit(0)


def tagged(tag: str) -> str:
    return f"{tag}<{PAYLOAD}>"


def say(session: str, text: str) -> None:
    update(session, {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})


def show(session: str) -> None:
    update(session, {"sessionUpdate": "session_info_update", "title": tagged("title")})
    update(session, {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": tagged("thought")}})
    say(session, tagged("message") + "\n\n")
    entries = [{"content": tagged("plan"), "priority": "medium", "status": "in_progress"}]
    update(session, {"sessionUpdate": "plan", "entries": entries})
    diff = {"type": "diff", "path": tagged("/tmp/diffpath"), "oldText": "old line\n", "newText": tagged("newtext")}
    update(
        session,
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "edit-1",
            "title": tagged("edittitle"),
            "kind": "edit",
            "status": "completed",
            "content": [diff],
        },
    )
    output = {"type": "content", "content": {"type": "text", "text": tagged("catoutput")}}
    update(
        session,
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "cat-1",
            "title": "cat README",
            "kind": "read",
            "status": "completed",
            "content": [output],
        },
    )
    call = {
        "toolCallId": "run-1",
        "title": "Run the tests",
        "kind": "execute",
        "status": "pending",
        "rawInput": {"command": SPOOF},
    }
    update(session, {"sessionUpdate": "tool_call", **call})
    options = [
        {"optionId": "yes-once", "name": tagged("allowlabel"), "kind": "allow_once"},
        {"optionId": "yes-always", "name": "Always allow", "kind": "allow_always"},
        {"optionId": "no", "name": tagged("rejectlabel"), "kind": "reject_once"},
    ]
    answer = ask("session/request_permission", {"sessionId": session, "toolCall": call, "options": options})
    outcome = answer.get("result", {}).get("outcome", {})
    chosen = outcome.get("optionId", outcome.get("outcome"))
    status = "completed" if chosen == "yes-once" else "failed"
    update(session, {"sessionUpdate": "tool_call_update", "toolCallId": "run-1", "status": status})
    say(session, f"chosen={chosen}\n")


def fs(session: str, verb: str, path: str) -> None:
    if verb == "write":
        answer = ask("fs/write_text_file", {"sessionId": session, "path": path, "content": "written by the agent\n"})
    else:
        answer = ask("fs/read_text_file", {"sessionId": session, "path": path})
    if "error" in answer:
        say(session, f"fs-error: {answer['error'].get('message')}\n")
    else:
        content = answer["result"].get("content", "")
        say(session, "fs-ok" + (f" {content.strip()}" if content else "") + "\n")


def run(session: str, command: str) -> None:
    created = ask("terminal/create", {"sessionId": session, "command": "sh", "args": ["-c", command]})
    if "error" in created:
        say(session, f"run-error: {created['error'].get('message')}\n")
        return
    terminal = created["result"]["terminalId"]
    ask("terminal/wait_for_exit", {"sessionId": session, "terminalId": terminal})
    output = ask("terminal/output", {"sessionId": session, "terminalId": terminal})["result"]["output"]
    ask("terminal/release", {"sessionId": session, "terminalId": terminal})
    say(session, f"run-output: {output.strip()}\n")


def main() -> None:
    session = "hostile-1"
    model = {
        "id": "model",
        "name": "Model",
        "category": "model",
        "type": "select",
        "currentValue": tagged("model"),
        "options": [{"value": tagged("model"), "name": tagged("modelname")}],
    }
    for line in sys.stdin:
        frame = json.loads(line)
        method, ident, params = frame.get("method"), frame.get("id"), frame.get("params") or {}
        if method is None or ident is None:
            continue  # answers to nothing we wait for, notifications (session/cancel)
        if method == "initialize":
            info = {"name": tagged("agentname"), "title": tagged("agenttitle"), "version": "1"}
            send({"id": ident, "result": {"protocolVersion": 1, "agentCapabilities": {}, "agentInfo": info}})
        elif method == "session/new":
            send({"id": ident, "result": {"sessionId": session, "configOptions": [model]}})
            commands = [{"name": "hostile", "description": tagged("commanddescription")}]
            update(session, {"sessionUpdate": "available_commands_update", "availableCommands": commands})
        elif method == "session/prompt":
            text = "".join(b.get("text", "") for b in params.get("prompt", []) if isinstance(b, dict))
            verb, _, rest = text.strip().partition(" ")
            if verb == "fail":
                send({"id": ident, "error": {"code": -32603, "message": tagged("errormessage")}})
                continue
            if verb == "show":
                show(session)
            elif verb in ("write", "read"):
                fs(session, verb, rest)
            elif verb == "run":
                run(session, rest)
            send({"id": ident, "result": {"stopReason": "end_turn"}})
        else:
            send({"id": ident, "error": {"code": -32601, "message": "Method not found"}})


if __name__ == "__main__":
    main()
