"""The chat keeps the user's keys (issue 34 item 2): it seals itself as ``dsh acp`` does, so a command it runs
for the agent (``terminal/create``) finds no provider key in ``/proc`` of any dsh process, while the agent it
started still has the key."""

from __future__ import annotations

import json
import secrets
import sys
from pathlib import Path

from tests.support.chat import run_piped
from tests.support.env import sandbox_env, write_script

PROBE = r"""
import json, os, sys
key = sys.argv[1].encode()[::-1]  # reversed on the command line: the probe's own argv never matches

def argv(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().split(b"\0")

def parent(pid):
    with open(f"/proc/{pid}/stat", "rb") as f:
        return int(f.read().rsplit(b")", 1)[1].split()[1])

chat = os.getppid()
while b"chat" not in argv(chat):  # the command runs under a shell the chat started
    chat = parent(chat)
ours = [chat] + [int(p) for p in os.listdir("/proc") if p.isdigit() and parent(int(p)) == chat and b"acp" in argv(int(p))]
found = {}
for pid in ours:
    what = [next(a.decode() for a in argv(pid) if a in (b"chat", b"acp"))]
    for name in ("environ", "mem"):
        try:
            with open(f"/proc/{pid}/{name}", "rb") as f:
                data = f.read(1 << 20) if name == "environ" else b""
            what.append(f"{name}:" + ("KEY" if key in data else "open"))
        except OSError as error:
            what.append(f"{name}:{type(error).__name__}")
    found[str(pid)] = what
found["self"] = "KEY" if key in b"".join(k.encode() + v.encode() for k, v in os.environ.items()) else "clean"
found["root"] = os.geteuid() == 0
open(sys.argv[2], "w").write(json.dumps(found))
"""


def test_a_command_run_through_the_chat_finds_no_key_in_proc_of_any_dsh_process(tmp_path: Path) -> None:
    key = "sk-test-" + secrets.token_hex(16)
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    report = tmp_path / "report.json"
    command = f"{sys.executable} {probe} {key[::-1]} {report}"
    steps = [{"tool_calls": [{"name": "run_command", "arguments": {"command": command}}]}, {"text": "Done."}]
    model = write_script(tmp_path / "s.json", steps)
    env = sandbox_env(tmp_path, model, extra={"OPENAI_API_KEY": key})
    trace = tmp_path / "trace"
    result = run_piped(["--yes", "--trace", str(trace)], "probe\n", env, tmp_path, timeout=60)
    assert result.returncode == 0, result.stderr
    assert '"method":"terminal/create"' in trace.read_text().replace(" ", "")  # the chat ran it, not the daemon
    found = json.loads(report.read_text())
    assert found.pop("self") == "clean"
    root = found.pop("root")
    roles = sorted(entry[0] for entry in found.values())
    assert roles == ["acp", "chat"], found  # both dsh processes were looked at
    for pid, entry in found.items():
        assert "environ:KEY" not in entry, (pid, entry)
        if not root:  # not dumpable: another process of the user cannot open its memory (root still can)
            assert "mem:open" not in entry, (pid, entry)
