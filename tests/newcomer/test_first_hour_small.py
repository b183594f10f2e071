"""Issue 43 item 4: the smaller first-hour items, each with its test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from dsh.config import load_config
from tests.support.env import sandbox_env
from tests.support.provider_server import Reply, serve
from tests.support.provider_wire import oa_text_reply

KEY = "sk-test-first-hour-0123456789"
WAIT = 60


def dsh(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dsh", *args],
        env=sandbox_env(tmp_path, "echo", extra=extra),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=WAIT,
        cwd=tmp_path,
    )


# -- dsh setup ---------------------------------------------------------------------------------------------------


def test_setup_saves_the_base_url_it_checked(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    with serve() as server:
        server.script(Reply(events=oa_text_reply("OK")))
        args = ["setup", "--provider", "openai", "--api-key", KEY, "--model", "m", "--config", str(config)]
        done = dsh(tmp_path, *args, OPENAI_BASE_URL=f"{server.url}/v1")
        assert done.returncode == 0, done.stderr
        assert len(server.requests) == 1  # the check went to the variable's address
    assert load_config(config).providers["openai"].base_url == f"{server.url}/v1"
    assert f"base URL {server.url}/v1 from OPENAI_BASE_URL saved" in done.stdout


def test_a_rejected_key_given_with_api_key_is_blamed_on_api_key(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    with serve() as server:
        server.script(Reply(status=401, body={"error": {"message": "Incorrect API key provided"}}))
        args = ["setup", "--provider", "openai", "--api-key", KEY, "--model", "m", "--config", str(config)]
        done = dsh(tmp_path, *args, "--base-url", f"{server.url}/v1", OPENAI_API_KEY="sk-other")
    assert done.returncode == 1 and not config.exists()
    assert done.stderr.count("\n") == 1 and "check the key given with --api-key" in done.stderr
    assert "OPENAI_API_KEY" not in done.stderr


# -- forks -------------------------------------------------------------------------------------------------------


def test_a_fork_gets_its_own_title(tmp_path: Path) -> None:
    assert dsh(tmp_path, "exec", "remember the tangerine").returncode == 0
    listed = dsh(tmp_path, "sessions", "list").stdout.split()
    source = listed[0]
    forked = dsh(tmp_path, "sessions", "fork", source)
    assert forked.returncode == 0, forked.stderr
    rows = {line.split()[0]: line for line in dsh(tmp_path, "sessions", "list").stdout.splitlines()}
    assert rows[source].endswith("  remember the tangerine")
    assert rows[forked.stdout.strip()].endswith("  Fork of remember the tangerine")
