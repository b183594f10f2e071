"""Issue #11: ``dsh setup`` writes the user's configuration (mode 0600) after checking the key with one small
request, tested against the loopback provider server (real HTTP, nothing mocked in the client)."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import stat
import subprocess
import sys
import termios
import time
from pathlib import Path

import anyio
import pytest
import yaml

from dsh.config import load_config
from tests.support.env import sandbox_env
from tests.support.provider_server import FakeProvider, Reply
from tests.support.provider_wire import oa_text_reply

WAIT = 30
KEY = "sk-test-setup-0123456789"


async def setup_cli(
    tmp_path: Path, *args: str, stdin: int | None = subprocess.DEVNULL
) -> subprocess.CompletedProcess[bytes]:
    env = sandbox_env(tmp_path, "echo")
    with anyio.fail_after(WAIT):
        return await anyio.run_process([sys.executable, "-m", "dsh", "setup", *args], env=env, stdin=stdin, check=False)


def flags(server: FakeProvider, config: Path, *extra: str) -> list[str]:
    return [
        "--provider", "openai", "--api-key", KEY, "--model", "test-model",
        "--base-url", f"{server.url}/v1", "--config", str(config), *extra,
    ]  # fmt: skip


async def test_non_interactive_setup_checks_the_key_then_writes_the_file_0600(
    server: FakeProvider, tmp_path: Path
) -> None:
    server.script(Reply(events=oa_text_reply("OK")))
    config = tmp_path / "conf" / "dsh" / "config.yaml"
    done = await setup_cli(tmp_path, *flags(server, config))
    out, err = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, err
    assert out == f"dsh: wrote {config} (model openai:test-model; key checked; mode 0600)\n"
    assert KEY not in out + err
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    loaded = load_config(config)
    assert loaded.model == "openai:test-model"
    settings = loaded.providers["openai"]
    assert settings.api_key is not None and settings.api_key.get_secret_value() == KEY
    assert settings.base_url == f"{server.url}/v1"
    (request,) = server.requests  # exactly one small request
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body["max_tokens"] == 1 and request.body["model"] == "test-model"


async def test_a_failed_check_writes_nothing_and_says_why_in_one_line(server: FakeProvider, tmp_path: Path) -> None:
    server.script(Reply(status=401, body={"error": {"message": "Incorrect API key provided"}}))
    config = tmp_path / "config.yaml"
    done = await setup_cli(tmp_path, *flags(server, config))
    err = done.stderr.decode()
    assert done.returncode == 1
    assert err.startswith("dsh: setup: the key check failed, nothing was written:") and err.count("\n") == 1, err
    assert "Traceback" not in err and KEY not in err
    assert not config.exists()
    assert len(server.requests) == 1  # no retries for a check


async def test_existing_keys_are_kept_and_an_existing_file_becomes_0600(server: FakeProvider, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("data_dir: /somewhere/sessions\nmodel: echo\n", encoding="utf-8")
    config.chmod(0o644)
    done = await setup_cli(tmp_path, *flags(server, config, "--no-check"))
    assert done.returncode == 0, done.stderr
    assert server.requests == []
    data = yaml.safe_load(config.read_text(encoding="utf-8"))
    assert data["data_dir"] == "/somewhere/sessions" and data["model"] == "openai:test-model"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600


@pytest.mark.parametrize(
    ("args", "says"),
    [([], "--provider is required"), (["--provider", "openai"], "--api-key is required")],
)
async def test_without_a_terminal_missing_answers_are_usage_errors(tmp_path: Path, args: list[str], says: str) -> None:
    done = await setup_cli(tmp_path, *args, "--config", str(tmp_path / "c.yaml"))
    err = done.stderr.decode()
    assert done.returncode == 2 and says in err and err.count("\n") == 1, err
    assert not (tmp_path / "c.yaml").exists()


def read_until(fd: int, seen: bytearray, marker: bytes) -> None:
    """Read the terminal into *seen* until *marker* appears (bounded by WAIT)."""
    deadline = time.monotonic() + WAIT
    while marker not in seen:
        assert time.monotonic() < deadline, f"no {marker!r} in {bytes(seen)!r}"
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            seen.extend(os.read(fd, 4096))


def _take_terminal() -> None:
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def test_interactive_setup_asks_provider_key_and_model(server: FakeProvider, tmp_path: Path) -> None:
    """On a terminal: typer prompts (the key hidden), defaults offered, the same check and file."""
    server.script(Reply(events=oa_text_reply("OK")))
    config = tmp_path / "config.yaml"
    controller, terminal = pty.openpty()
    env = sandbox_env(tmp_path, "echo")
    process = subprocess.Popen(
        [sys.executable, "-m", "dsh", "setup", "--base-url", f"{server.url}/v1", "--config", str(config)],
        stdin=terminal, stdout=terminal, stderr=subprocess.PIPE, env=env,
        start_new_session=True, preexec_fn=_take_terminal,  # the pty is its controlling terminal (getpass)
    )  # fmt: skip
    os.close(terminal)
    seen = bytearray()
    try:
        read_until(controller, seen, b"[openai]:")
        os.write(controller, b"openai\n")
        read_until(controller, seen, b"API key:")
        # getpass turns echo off (flushing pending input) after the prompt is out: type only then.
        deadline = time.monotonic() + WAIT
        while termios.tcgetattr(controller)[3] & termios.ECHO:
            assert time.monotonic() < deadline, "echo never turned off for the key"
            time.sleep(0.01)
        typed_at = len(seen)
        os.write(controller, KEY.encode() + b"\n")
        read_until(controller, seen, b"Default model [gpt-4.1-mini]:")
        assert KEY.encode() not in seen[typed_at:]  # the key was not echoed
        os.write(controller, b"test-model\n")
        read_until(controller, seen, b"mode 0600)")
        assert process.wait(timeout=WAIT) == 0, process.stderr.read() if process.stderr else ""
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()
        os.close(controller)
    text = seen.decode(errors="replace")
    assert f"wrote {config}" in text
    assert load_config(config).model == "openai:test-model"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
