"""Issue 43 item 2: errors that point the way. Each message is one line on stderr and names what to do next (the
spelling that works, the variable and ``dsh setup``, ``dsh chat``, the directory involved)."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.newcomer._cli import WAIT, dsh
from tests.support.chat import run_piped
from tests.support.env import sandbox_env


def one_line(text: str) -> str:
    assert text.count("\n") == 1 and "Traceback" not in text, text
    return text


@pytest.mark.parametrize(
    ("bare", "spelled"),
    [
        ("gpt-4.1", "openai:gpt-4.1"),
        ("claude-sonnet-4-5", "anthropic:claude-sonnet-4-5"),
        ("deepseek-chat", "deepseek:deepseek-chat"),
    ],
)
def test_a_bare_model_name_suggests_the_provider_that_serves_it(tmp_path: Path, bare: str, spelled: str) -> None:
    done = dsh(tmp_path, "exec", "--model", bare, "hi")
    assert done.returncode == 2
    assert f"(did you mean {spelled!r}?)" in one_line(done.stderr)


def test_the_daemon_suggests_it_too(tmp_path: Path) -> None:
    done = dsh(tmp_path, "acp", "--model", "gpt-4.1")  # stdin at its end: the daemon stops after saying it
    assert "(did you mean 'openai:gpt-4.1'?)" in done.stderr


def test_exec_without_the_key_names_the_variable_and_dsh_setup(tmp_path: Path) -> None:
    env = {k: v for k, v in sandbox_env(tmp_path, "openai:gpt-4.1").items() if k != "OPENAI_API_KEY"}
    done = dsh(tmp_path, "exec", "hi", env=env)
    assert done.returncode == 2
    line = one_line(done.stderr)
    assert "export OPENAI_API_KEY=" in line and "`dsh setup`" in line


def test_piped_chat_without_the_key_names_the_variable_and_dsh_setup(tmp_path: Path) -> None:
    env = {k: v for k, v in sandbox_env(tmp_path, "openai:gpt-4.1").items() if k != "OPENAI_API_KEY"}
    done = run_piped([], "hi\n", env, tmp_path)
    assert done.returncode == 1
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("[error]")]
    assert "OPENAI_API_KEY" in line and "dsh setup" in line


def test_dsh_acp_on_a_terminal_points_to_dsh_chat_and_still_serves(tmp_path: Path) -> None:
    controller, terminal = pty.openpty()
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "dsh", "acp"],
            env=sandbox_env(tmp_path, "echo"),
            stdin=terminal,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
        )
        request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
        os.write(controller, orjson.dumps(request) + b"\n")
        assert process.stdout is not None and process.stderr is not None
        answer = orjson.loads(process.stdout.readline())
        assert answer["id"] == 1 and "agentCapabilities" in answer["result"]  # it serves
        os.write(controller, b"\x04")  # Ctrl+D: end of input
        process.wait(timeout=WAIT)
        stderr = process.stderr.read().decode()
        process.stdout.close()
        process.stderr.close()
    finally:
        os.close(controller)
        os.close(terminal)
    (line,) = [line for line in stderr.splitlines() if "dsh chat" in line]
    assert line.startswith("dsh acp: ") and "editors" in line and "run `dsh chat`" in line


def test_dsh_acp_from_an_editor_says_nothing_of_the_sort(tmp_path: Path) -> None:
    done = dsh(tmp_path, "acp")
    assert "dsh chat" not in done.stderr


@pytest.mark.parametrize("how", ["flag", "variable"])
def test_a_data_dir_that_does_not_exist_is_created_and_named(tmp_path: Path, how: str) -> None:
    target = tmp_path / "typo" / "sessions"
    env = sandbox_env(tmp_path, "echo", data_dir=target)
    args = ["exec", "--data-dir", str(target), "hi"] if how == "flag" else ["exec", "hi"]
    done = dsh(tmp_path, *args, env=env)
    assert done.returncode == 0 and done.stdout == "hi\n"
    line = one_line(done.stderr)
    origin = "--data-dir" if how == "flag" else "DSH_DATA_DIR"
    assert line == f"dsh exec: created the data directory {target} ({origin}); it did not exist\n"
    assert target.is_dir() and list(target.glob("*.jsonl"))
    again = dsh(tmp_path, *args, env=env)
    assert again.returncode == 0 and again.stderr == ""  # said once: it exists now


def test_the_chat_and_the_daemon_name_the_directory_they_create(tmp_path: Path) -> None:
    target = tmp_path / "chat-typo"
    env = sandbox_env(tmp_path, "echo", data_dir=target)
    chat = run_piped(["--data-dir", str(target)], "hi\n", env, tmp_path)
    assert chat.returncode == 0
    assert chat.stderr == f"dsh chat: created the data directory {target} (--data-dir); it did not exist\n"
    other = tmp_path / "acp-typo"
    daemon = dsh(tmp_path, "acp", env=sandbox_env(tmp_path, "echo", data_dir=other))
    assert f"dsh acp: created the data directory {other} (DSH_DATA_DIR); it did not exist" in daemon.stderr


def test_sessions_list_says_which_store_it_read(tmp_path: Path) -> None:
    env = sandbox_env(tmp_path, "echo")
    assert dsh(tmp_path, "exec", "hi", env=env).returncode == 0
    listed = dsh(tmp_path, "sessions", "list", env=env)
    assert listed.returncode == 0 and "hi" in listed.stdout
    assert one_line(listed.stderr) == f"dsh: sessions in {env['DSH_DATA_DIR']} (DSH_DATA_DIR)\n"
    typo = tmp_path / "dsh-dta"
    missing = dsh(tmp_path, "sessions", "list", "--data-dir", str(typo), env=env)
    assert missing.returncode == 0 and missing.stdout == f"No sessions: {typo} (--data-dir) does not exist.\n"
    assert not typo.exists()  # reading never creates it


@pytest.mark.parametrize("command", [["exec", "hi"], ["config", "show"], ["sessions", "list"]])
def test_a_dangling_config_symlink_is_an_error_naming_it(tmp_path: Path, command: list[str]) -> None:
    env = sandbox_env(tmp_path, "echo")
    config = Path(env["XDG_CONFIG_HOME"]) / "dsh" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.symlink_to(tmp_path / "dotfiles" / "dsh.yaml")
    done = dsh(tmp_path, *command, env=env)
    assert done.returncode == 1
    line = one_line(done.stderr)
    assert str(config) in line and str(tmp_path / "dotfiles" / "dsh.yaml") in line and "fix or remove the link" in line
