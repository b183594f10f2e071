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

from tests.support.chat import Tmux, tmux_available, tmux_chat
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
        tmux.type("/hos")
        await tmux.wait_for(lambda s: f"commanddescription{VISIBLE}" in s)
        tmux.keys("C-u")
        history = tmux.history()
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
