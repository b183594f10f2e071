"""``dsh chat`` as a person or a script runs it: piped (a subprocess with stdin/stdout pipes) or in a real
terminal (tmux: ``send-keys`` to type, ``capture-pane`` to read the screen).

Guarantees: every chat runs with :func:`tests.support.env.sandbox_env` (sessions, config and caches under the
test's own directory); every tmux server is private to the test (its own socket in a fresh temporary directory) and is
killed on exit, with whatever it ran; :meth:`Tmux.wait_for` polls the screen until a condition holds, bounded by
``anyio.fail_after``, and on a timeout fails with the screen as it was.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import orjson

from tests.support.env import ROOT

__all__ = [
    "CHAT",
    "SDK_ECHO_AGENT",
    "Tmux",
    "check_chat_frames",
    "read_trace",
    "run_piped",
    "tmux_available",
    "tmux_chat",
]

CHAT = [sys.executable, "-m", "dsh", "chat"]
SDK_ECHO_AGENT = f"{shlex.quote(sys.executable)} {shlex.quote(str(ROOT / 'scripts' / 'peers' / 'sdk_echo_agent.py'))}"
"""The official ACP Python SDK's echo agent (``scripts/peers``), as a ``--agent`` command line."""


def run_piped(
    args: list[str], stdin: str, env: Mapping[str, str], cwd: Path, timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CHAT, *args], input=stdin, capture_output=True, text=True, env=dict(env), cwd=cwd, timeout=timeout
    )


def read_trace(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """The frames of a ``--trace`` file: ``(">" sent | "<" received, frame)``."""
    frames = []
    for line in path.read_bytes().splitlines():
        direction, _, frame = line.partition(b" ")
        frames.append((direction.decode(), orjson.loads(frame)))
    return frames


def tmux_available() -> bool:
    return shutil.which("tmux") is not None


class Tmux:
    def __init__(self, socket: Path) -> None:
        self.socket = socket
        self.status_file = socket.parent / "status"
        """Where the pane's shell writes the chat's exit status: tmux can be slow to notice a pane's process has
        exited (seen: a zombie for over 10 s under load), the shell that started it never is."""

    def _run(self, *args: str) -> str:
        result = subprocess.run(
            ["tmux", "-S", str(self.socket), *args], capture_output=True, text=True, timeout=10, check=True
        )
        return result.stdout

    def screen(self, *, escapes: bool = False) -> str:
        """The visible pane as plain text, trailing blanks stripped; with *escapes*, its colours and attributes
        as SGR escape sequences."""
        return self._run("capture-pane", "-p", *(["-e"] if escapes else []), "-t", "chat").rstrip()

    def history(self) -> str:
        """The scrollback and the pane."""
        return self._run("capture-pane", "-p", "-S", "-", "-t", "chat").rstrip()

    def keys(self, *keys: str) -> None:
        """tmux key names (``Enter``, ``C-c``, ``Tab``) or literal text with ``literal``."""
        self._run("send-keys", "-t", "chat", *keys)

    def type(self, text: str) -> None:
        self._run("send-keys", "-t", "chat", "-l", text)

    async def wait_for(self, ready: Callable[[str], bool], *, within: float = 10, history: bool = False) -> str:
        screen = ""
        try:
            with anyio.fail_after(within):
                while True:
                    screen = self.history() if history else self.screen()
                    if ready(screen):
                        return screen
                    await anyio.sleep(0.05)  # polling the screen: tmux offers no change event
        except TimeoutError:
            raise AssertionError(f"the screen never got there; it shows:\n{screen}") from None

    def exited(self) -> int | None:
        """The chat's exit status, or None while it runs."""
        try:
            text = self.status_file.read_text().strip()
        except FileNotFoundError:
            return None
        return int(text) if text.isdigit() else None

    async def exit_status(self, *, within: float = 5) -> int:
        """Wait for the chat to exit; its exit status."""
        with _screen_on_timeout(self), anyio.fail_after(within):
            while True:
                status = self.exited()
                if status is not None:
                    return status
                await anyio.sleep(0.05)  # polling a file the pane's shell writes: no exit event reaches us


@contextmanager
def _screen_on_timeout(tmux: Tmux) -> Iterator[None]:
    try:
        yield
    except TimeoutError:
        raise AssertionError(f"the chat did not exit; the screen shows:\n{tmux.screen()}") from None


@contextmanager
def tmux_chat(
    tmp_path: Path,
    args: list[str],
    env: Mapping[str, str],
    cwd: Path,
    *,
    width: int = 100,
    height: int = 30,
    raw: Path | None = None,
) -> Iterator[Tmux]:
    """``dsh chat ARGS`` in a private tmux server's only pane; the pane stays after the chat exits
    (``remain-on-exit``) so its last screen can be read. With *raw*, every byte the chat writes to the pty is
    appended to that file (``pipe-pane``, started before the chat)."""
    socket_dir = Path(tempfile.mkdtemp(prefix="dsh-tmux-"))  # a short path: a unix socket's is limited to ~107 bytes
    socket = socket_dir / "sock"
    tmux = Tmux(socket)
    conf = socket_dir / "tmux.conf"
    conf.write_text("set -g history-limit 20000\n")  # a 5,000-line reply stays in the scrollback, whole
    env_args = [f"{name}={value}" for name, value in env.items()]
    chat = shlex.join(["env", "-i", *env_args, "TERM=xterm-256color", *CHAT, *args])
    command = f"{chat}; echo $? > {shlex.quote(str(tmux.status_file))}"
    subprocess.run(
        [
            "tmux",
            "-S",
            str(socket),
            "-f",
            str(conf),
            "new-session",
            "-d",
            "-s",
            "chat",
            "-x",
            str(width),
            "-y",
            str(height),
            "-c",
            str(cwd),
        ],
        check=True,
        timeout=10,
        env={"PATH": env.get("PATH", "/usr/bin:/bin"), "TERM": "xterm-256color", "HOME": str(tmp_path)},
    )
    try:
        tmux._run("set-option", "-t", "chat", "remain-on-exit", "on")
        if raw is not None:
            tmux._run("pipe-pane", "-t", "chat", f"cat >> {shlex.quote(str(raw))}")
        tmux._run("respawn-pane", "-k", "-t", "chat", command)
        yield tmux
    finally:
        subprocess.run(["tmux", "-S", str(socket), "kill-server"], capture_output=True, timeout=10)
        shutil.rmtree(socket_dir, ignore_errors=True)


def check_chat_frames(frames: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Every frame the chat sent validates against the official ACP SDK's schema models: its requests and
    notifications by method, its answers by the method of the agent's request they answer; and every request of
    the agent got exactly one answer. The problems found (empty: all good)."""
    from acp import schema
    from pydantic import BaseModel, ValidationError

    sent_models: dict[str, type[BaseModel]] = {
        "initialize": schema.InitializeRequest,
        "session/new": schema.NewSessionRequest,
        "session/load": schema.LoadSessionRequest,
        "session/list": schema.ListSessionsRequest,
        "session/prompt": schema.PromptRequest,
        "session/cancel": schema.CancelNotification,
        "session/set_config_option": schema.SetSessionConfigOptionSelectRequest,
        "session/set_mode": schema.SetSessionModeRequest,
        "_dsh/session/steer": schema.PromptRequest,  # dsh's steering request: a prompt's params (RFC 0036)
    }
    answer_models: dict[str, type[BaseModel]] = {
        "session/request_permission": schema.RequestPermissionResponse,
        "fs/read_text_file": schema.ReadTextFileResponse,
        "fs/write_text_file": schema.WriteTextFileResponse,
        "terminal/create": schema.CreateTerminalResponse,
        "terminal/output": schema.TerminalOutputResponse,
        "terminal/wait_for_exit": schema.WaitForTerminalExitResponse,
        "terminal/kill": schema.KillTerminalResponse,
        "terminal/release": schema.ReleaseTerminalResponse,
    }
    problems: list[str] = []
    asked: dict[Any, str] = {}
    answered: dict[Any, int] = {}
    for direction, frame in frames:
        if direction == "<" and "method" in frame and "id" in frame:
            asked[frame["id"]] = frame["method"]
    for direction, frame in frames:
        if direction != ">":
            continue
        if frame.get("jsonrpc") != "2.0":
            problems.append(f"not JSON-RPC 2.0: {frame}")
        try:
            if "method" in frame:
                model = sent_models.get(frame["method"])
                if model is None:
                    problems.append(f"unexpected method {frame['method']}")
                else:
                    model.model_validate(frame.get("params"))
            elif "result" in frame:
                answered[frame["id"]] = answered.get(frame["id"], 0) + 1
                method = asked.get(frame["id"], "?")
                answer_models[method].model_validate(frame["result"])
            else:
                answered[frame["id"]] = answered.get(frame["id"], 0) + 1
                assert isinstance(frame["error"]["code"], int) and isinstance(frame["error"]["message"], str)
        except (ValidationError, KeyError, AssertionError) as error:
            problems.append(f"{frame}: {error}")
    problems += [
        f"agent request {i} ({m}) answered {answered.get(i, 0)} times"
        for i, m in asked.items()
        if answered.get(i, 0) != 1
    ]
    return problems
