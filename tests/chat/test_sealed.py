"""The chat keeps the user's keys (issue 34 item 2): it seals itself as ``dsh acp`` does, so a command it runs
for the agent (``terminal/create``) finds no provider key in ``/proc`` of any dsh process, while the agent it
started still has the key."""

from __future__ import annotations

import json
import secrets
import shlex
import sys
from pathlib import Path

from tests.support.chat import run_piped
from tests.support.env import ROOT, sandbox_env, write_script

HOSTILE = f"{shlex.quote(sys.executable)} {shlex.quote(str(ROOT / 'tests' / 'support' / 'hostile_agent.py'))}"

PROBE = r"""
import json, os, sys
key = sys.argv[1].encode()[::-1]  # reversed on the command line: the probe's own argv never matches

def argv(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []

def parent(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[1])
    except OSError:
        return -1

chat = os.getppid()
while chat > 1 and b"chat" not in argv(chat):  # the command runs under a shell the chat (or dsh) started
    chat = parent(chat)
found = {"chat_visible": chat > 1}
try:
    names = os.listdir("/proc")
except PermissionError:  # a sandbox that hides /proc: nothing there to find
    names = []
    found["chat_visible"] = False
for name in names:  # every dsh chat and daemon this process can see (others' hold other keys)
    if not name.isdigit() or int(name) == os.getpid():
        continue
    pid = int(name)
    args = argv(pid)
    if b"dsh" not in args or not ({b"chat", b"acp"} & set(args)):
        continue
    mine = pid == chat or parent(pid) == chat
    what = [next(a.decode() for a in args if a in (b"chat", b"acp")), "ours" if mine else "other"]
    for entry in ("environ", "mem"):
        try:
            with open(f"/proc/{pid}/{entry}", "rb") as f:
                data = f.read(1 << 20) if entry == "environ" else b""
            what.append(f"{entry}:" + ("KEY" if key in data else "open"))
        except OSError as error:
            what.append(f"{entry}:{type(error).__name__}")
    found[str(pid)] = what
found["self"] = "KEY" if key in b"".join(k.encode() + v.encode() for k, v in os.environ.items()) else "clean"
found["root"] = os.geteuid() == 0
open(sys.argv[2], "w").write(json.dumps(found))
"""


def check(report: Path, roles: list[str]) -> None:
    found = json.loads(report.read_text())
    assert found.pop("self") == "clean"
    root = found.pop("root")
    visible = found.pop("chat_visible")
    for pid, entry in found.items():
        assert "environ:KEY" not in entry, (pid, entry)
        if not root and entry[1] == "ours":  # not dumpable: another process of the user cannot open its memory
            assert "mem:open" not in entry, (pid, entry)
    if visible:  # a command in a PID namespace of its own sees no dsh process at all: nothing to find
        assert sorted(e[0] for e in found.values() if e[1] == "ours") == roles, found


def test_a_command_the_chat_runs_for_an_agent_finds_no_key_in_the_chats_proc(tmp_path: Path) -> None:
    key = "sk-test-" + secrets.token_hex(16)
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    report = tmp_path / "report.json"
    env = sandbox_env(tmp_path, "echo", extra={"OPENAI_API_KEY": key})
    trace = tmp_path / "trace"
    line = f"run {sys.executable} {probe} {key[::-1]} {report}\n"
    result = run_piped(["--agent", HOSTILE, "--trust-agent", "--trace", str(trace)], line, env, tmp_path, timeout=60)
    assert result.returncode == 0, result.stderr
    assert '"method":"terminal/create"' in trace.read_text().replace(" ", "")  # the chat ran it
    check(report, ["chat"])


def test_a_command_dsh_runs_finds_no_key_in_proc_of_any_dsh_process(tmp_path: Path) -> None:
    key = "sk-test-" + secrets.token_hex(16)
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    report = tmp_path / "report.json"
    command = f"{sys.executable} {probe} {key[::-1]} {report}"
    steps = [{"tool_calls": [{"name": "run_command", "arguments": {"command": command}}]}, {"text": "Done."}]
    model = write_script(tmp_path / "s.json", steps)
    env = sandbox_env(tmp_path, model, extra={"OPENAI_API_KEY": key})
    result = run_piped(["--yes"], "probe\n", env, tmp_path, timeout=60)
    assert result.returncode == 0, result.stderr
    assert report.exists(), result.stderr  # the probe ran (in dsh's sandbox, which may hide /proc: then fine too)
    check(report, ["acp", "chat"])  # run by the daemon or through the chat's terminal/create: both are looked at
