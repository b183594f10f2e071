"""A hostile agent cannot drive the terminal through ``dsh chat`` (issue 34 item 1): every field the chat renders
carries escape sequences (OSC 0 title, OSC 52 clipboard, clear screen, SGR 8, a bidi override, a C1 CSI, BEL,
DEL, NUL); the screen shows them as visible text, the window title and the clipboard stay as they were, and the
bytes written to the pty hold none of them. The spoofed permission question shows the code that would run."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest

from tests.support.chat import Tmux, run_piped, tmux_available, tmux_chat
from tests.support.env import ROOT, sandbox_env
from tests.support.hostile_agent import PAYLOAD

pytestmark = pytest.mark.skipif(not tmux_available(), reason="tmux is not installed")

HOSTILE = f"{shlex.quote(sys.executable)} {shlex.quote(str(ROOT / 'tests' / 'support' / 'hostile_agent.py'))}"
PROMPT = "\u276f"
VISIBLE = "<^[]0;PWNED-TITLE^G^[]52;c;cHduZWQ=^G^[[2J^[[8mHIDDEN-TEXT^[[0m<U+202E>BIDI-RTL<U+202C>\\x9b31mC1-CSI^G^?^@>"
""":data:`PAYLOAD` as the chat shows it."""


def chat_ready(screen: str) -> bool:
    lines = screen.splitlines()
    return any(line.startswith(PROMPT) for line in lines) and "model<" in lines[-1] and "Ctrl+C cancels" not in screen


async def submit(tmux: Tmux, text: str) -> None:
    tmux.type(text)
    await tmux.wait_for(lambda screen: text in screen)
    tmux.keys("Enter")


def foreign_escapes(data: bytes) -> list[str]:
    """What of the payload reached the pty as control sequences (the chat's own SGR and cursor moves aside)."""
    found = []
    for name, needle in (
        ("OSC 0", b"\x1b]0;PWNED"),
        ("OSC 52", b"\x1b]52"),
        ("C1 CSI", "\x9b".encode()),
        ("RLO", "\u202e".encode()),
        ("BEL", b"\x07"),
        ("NUL", b"\x00"),
        ("DEL", b"\x7f"),
    ):
        if needle in data:
            found.append(name)
    if re.search(rb"\x1b\[(?:[0-9;]*;)?8(?:;[0-9;]*)?m", data):
        found.append("SGR 8")
    if b"\x1b[2J" in data:
        found.append("CSI 2J")
    return found


async def test_every_rendered_field_is_shown_as_text_and_no_escape_reaches_the_terminal(tmp_path: Path) -> None:
    raw = tmp_path / "pty.bytes"
    env = sandbox_env(tmp_path, "echo")
    with tmux_chat(tmp_path, ["--agent", HOSTILE], env, tmp_path, width=260, height=60, raw=raw) as tmux:
        tmux._run("set-option", "-s", "set-clipboard", "on")  # an OSC 52 that got through would make a buffer
        title_before = tmux._run("display-message", "-p", "-t", "chat", "#{pane_title}")
        await tmux.wait_for(chat_ready)
        await submit(tmux, "show")
        asking = await tmux.wait_for(lambda s: "Allow?" in s)
        # the spoofed question: the hidden code is on screen, its escapes visible, the fake command after it
        spoof = next(line for line in asking.splitlines() if line.strip().startswith("$ "))
        assert '$ python3 -c \'open("pwned", "w")\' # ^[[2K^M^[[1A' in spoof and "$ python3 -m pytest -q" in spoof
        flat = " ".join(line.strip() for line in asking.splitlines())  # the question wraps at the screen's width
        question = flat[flat.index("Allow?") : flat.index("(Ctrl+C cancels")]
        # fixed labels by kind; the agent's own labels only as quoted, sanitised data
        assert f"[y] Allow (\u201callowlabel{VISIBLE}\u201d)" in question
        assert "[a] Always allow " in question and f"[n] Reject (\u201crejectlabel{VISIBLE}\u201d)" in question
        tmux.keys("y")
        await tmux.wait_for(lambda s: "chosen=yes-once" in s and chat_ready(s))
        await submit(tmux, "/thoughts")
        await tmux.wait_for(lambda s: f"thought{VISIBLE}" in s)
        await submit(tmux, "fail")
        await tmux.wait_for(lambda s: f"Error: errormessage{VISIBLE}" in s and chat_ready(s))
        history = tmux.history()  # before the menu below covers the status line
        tmux.type("/hos")
        await tmux.wait_for(lambda s: f"commanddescription{VISIBLE}" in s)
        tmux.keys("C-u")
        for tag in ("title", "message", "plan", "edittitle", "newtext", "catoutput", "model"):
            assert f"{tag}{VISIBLE}" in history, tag
        assert f"tmp/diffpath{VISIBLE}" in history
        screen = tmux.screen(escapes=True)
        tmux.keys("C-d")
        await tmux.exit_status(within=30)
        assert (tmp_path / "pwned").exists() is False  # the hostile agent never ran anything; the chat did not either
        assert tmux._run("display-message", "-p", "-t", "chat", "#{pane_title}") == title_before
        assert tmux._run("list-buffers") == ""
    assert foreign_escapes(screen.encode()) == []
    data = raw.read_bytes()
    assert b"HIDDEN-TEXT" in data  # the capture holds the session
    assert foreign_escapes(data) == []
    assert foreign_escapes(PAYLOAD.encode()) == [
        "OSC 0",
        "OSC 52",
        "C1 CSI",
        "RLO",
        "BEL",
        "NUL",
        "DEL",
        "SGR 8",
        "CSI 2J",
    ]


async def test_another_agent_is_asked_about_before_outside_files_and_every_command(tmp_path: Path) -> None:
    """Issue 34 item 3: with ``--agent``, ``terminal/create`` and ``fs/*`` outside the cwd ask the user first."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "inside.txt").write_text("inside text\n")
    outside = tmp_path / "outside.txt"
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read\n")
    env = sandbox_env(tmp_path, "echo")
    with tmux_chat(tmp_path, ["--agent", HOSTILE], env, work, width=200, height=50) as tmux:
        await tmux.wait_for(chat_ready)
        await submit(tmux, f"read {work / 'inside.txt'}")  # inside the cwd: served without a question
        await tmux.wait_for(lambda s: "fs-ok inside text" in s and chat_ready(s))
        await submit(tmux, "run touch ran; printf '\\033]0;T\\007'")
        asking = await tmux.wait_for(lambda s: "Allow?" in s)
        assert "The agent wants to run a command" in asking
        assert "$ sh -c 'touch ran; printf '\"'\"'\\033]0;T\\007'\"'\"''" in asking  # as it will run, sanitised
        tmux.keys("n")
        await tmux.wait_for(lambda s: "run-error: the user refused to let the agent run sh -c" in s and chat_ready(s))
        assert not (work / "ran").exists()
        await submit(tmux, f"read {secret}")
        asking = await tmux.wait_for(lambda s: "Allow?" in s)
        assert f"The agent wants to read {secret} (outside {work})" in asking
        tmux.keys("n")
        refused = await tmux.wait_for(lambda s: "fs-error: the user refused" in s and chat_ready(s))
        assert "do not read" not in refused
        await submit(tmux, f"write {outside}")
        asking = await tmux.wait_for(lambda s: "Allow?" in s)
        assert f"The agent wants to write {outside}" in asking and "+written by the agent" in asking
        assert not outside.exists()
        tmux.keys("y")
        await tmux.wait_for(lambda s: s.count("fs-ok") == 2 and chat_ready(s))
        assert outside.read_text() == "written by the agent\n"
        tmux.keys("C-d")
        assert await tmux.exit_status(within=30) == 0


async def test_trust_agent_serves_commands_and_outside_files_without_asking(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    env = sandbox_env(tmp_path, "echo")
    with tmux_chat(tmp_path, ["--agent", HOSTILE, "--trust-agent"], env, work, width=200, height=50) as tmux:
        await tmux.wait_for(chat_ready)
        await submit(tmux, "run echo from-the-command")
        await tmux.wait_for(lambda s: "run-output: from-the-command" in s and chat_ready(s))
        await submit(tmux, f"write {tmp_path / 'outside.txt'}")
        screen = await tmux.wait_for(lambda s: "fs-ok" in s and chat_ready(s))
        assert "Allow?" not in tmux.history() and "Allow?" not in screen
        assert (tmp_path / "outside.txt").read_text() == "written by the agent\n"
        tmux.keys("C-d")
        assert await tmux.exit_status(within=30) == 0


def test_piped_chat_refuses_another_agents_command_unless_yes_and_prints_no_escape(tmp_path: Path) -> None:
    env = sandbox_env(tmp_path, "echo")
    refused = run_piped(["--agent", HOSTILE], "run echo hi\nshow\n", env, tmp_path)
    assert "run-error: the user refused to let the agent run sh -c 'echo hi'" in refused.stdout
    assert "[permission] The agent wants to run a command: rejected" in refused.stderr
    assert f"message{VISIBLE}" in refused.stdout
    assert foreign_escapes((refused.stdout + refused.stderr).encode()) == []
    assert "\x1b" not in refused.stdout + refused.stderr
    allowed = run_piped(["--agent", HOSTILE, "--yes"], "run echo hi\n", env, tmp_path)
    assert "run-output: hi" in allowed.stdout
