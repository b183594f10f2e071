"""``dsh chat`` without a terminal: one prompt per line, plain text out (issue 27, "piped mode")."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

from tests.support.chat import CHAT, SDK_ECHO_AGENT, check_chat_frames, read_trace, run_piped
from tests.support.env import approved_commands_unconfined, sandbox_env, write_script

ANSI = re.compile(r"\x1b\[")


def test_piped_prompt_and_status_print_the_reply_and_the_status(tmp_path: Path) -> None:
    result = run_piped([], "hello\n/status\n", sandbox_env(tmp_path, "echo"), tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "hello"
    assert "Model: echo" in lines
    assert f"Directory: {tmp_path}" in lines
    assert not ANSI.search(result.stdout + result.stderr)


def test_piped_mode_rejects_a_permission_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("hello world\n")
    steps = [
        {
            "text": "Editing.",
            "tool_calls": [
                {"name": "read_file", "arguments": {"path": "f.txt"}},  # edits follow a read (RFC 0018)
                {"name": "edit_file", "arguments": {"path": "f.txt", "old_string": "hello", "new_string": "bye"}},
            ],
        },
        {"text": "Done."},
    ]
    model = write_script(tmp_path / "s.json", steps)
    result = run_piped([], "go\n", sandbox_env(tmp_path, model), tmp_path)
    assert result.returncode == 1, result.stderr  # issue 43: the work asked for was not done, as dsh exec says
    assert (tmp_path / "f.txt").read_text() == "hello world\n"
    assert "[permission] Edit f.txt: rejected" in result.stderr
    assert result.stdout.splitlines() == ["Editing.", "Done."]


def test_piped_yes_allows_and_the_chat_serves_the_file_writes(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("hello world\n")
    steps = [
        {
            "tool_calls": [
                {"name": "read_file", "arguments": {"path": "f.txt"}},  # edits follow a read (RFC 0018)
                {"name": "edit_file", "arguments": {"path": "f.txt", "old_string": "hello", "new_string": "bye"}},
            ]
        },
        {"tool_calls": [{"name": "run_command", "arguments": {"command": "echo from-the-chat"}}]},
        {"text": "Done."},
    ]
    model = write_script(tmp_path / "s.json", steps)
    trace = tmp_path / "trace.jsonl"
    env = approved_commands_unconfined(sandbox_env(tmp_path, model))  # the command runs in the chat's terminal
    result = run_piped(["--yes", "--trace", str(trace)], "go\n", env, tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "f.txt").read_text() == "bye world\n"
    frames = read_trace(trace)
    assert check_chat_frames(frames) == []
    asked = [frame["method"] for direction, frame in frames if direction == "<" and "method" in frame and "id" in frame]
    assert asked.count("fs/write_text_file") == 1
    assert "terminal/create" in asked and "terminal/release" in asked
    outputs = [f for d, f in frames if d == ">" and isinstance(f.get("result"), dict) and "output" in f["result"]]
    assert outputs and "from-the-chat" in outputs[-1]["result"]["output"]
    assert "[tool] Edit f.txt: completed" in result.stderr


def test_piped_mode_against_the_sdk_example_agent(tmp_path: Path) -> None:
    result = run_piped(["--agent", SDK_ECHO_AGENT], "hello from a pipe\n", sandbox_env(tmp_path, "echo"), tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "hello from a pipe\n"


def test_an_agent_that_cannot_start_is_one_line_and_status_1(tmp_path: Path) -> None:
    result = run_piped(["--agent", str(tmp_path / "no-such-agent")], "hi\n", sandbox_env(tmp_path, "echo"), tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith("dsh chat: cannot start the agent")
    assert "Traceback" not in result.stderr


def test_a_prompt_answered_with_an_error_says_why_and_the_next_line_still_runs(tmp_path: Path) -> None:
    env = {k: v for k, v in sandbox_env(tmp_path, "openai:gpt-4.1").items() if k != "OPENAI_API_KEY"}
    result = run_piped([], "hello\n/status\n", env, tmp_path)
    assert result.returncode == 1
    assert "[error] Authentication required" in result.stderr and "OPENAI_API_KEY" in result.stderr
    assert "Model: openai:gpt-4.1" in result.stdout.splitlines()  # the session went on
    assert "Traceback" not in result.stderr


def test_sigterm_ends_the_chat_and_the_command_it_runs_for_the_agent(tmp_path: Path) -> None:
    pid_file = tmp_path / "command.pid"
    command = f"echo $$ > {pid_file}; exec sleep 60"
    steps = [{"tool_calls": [{"name": "run_command", "arguments": {"command": command}}]}, {"text": "never"}]
    model = write_script(tmp_path / "s.json", steps)
    chat = subprocess.Popen(
        [*CHAT, "--yes"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=sandbox_env(tmp_path, model),
        cwd=tmp_path,
    )
    try:
        assert chat.stdin is not None
        chat.stdin.write(b"go\n")
        chat.stdin.flush()  # stdin stays open: the chat is mid-turn, the command running
        deadline = time.monotonic() + 20
        while not (pid_file.exists() and pid_file.read_text().strip()):
            assert time.monotonic() < deadline, "the command never started"
            time.sleep(0.05)  # polling a file another process writes: there is no event to wait on
        command_pid = int(pid_file.read_text())
        chat.send_signal(signal.SIGTERM)
        chat.wait(timeout=10)
        deadline = time.monotonic() + 5
        while _alive(command_pid):
            assert time.monotonic() < deadline, "the command outlived the chat"
            time.sleep(0.05)
    finally:
        chat.kill()
        chat.communicate()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
