"""Issue 43 item 4: the smaller first-hour items, each with its test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from dsh.config import load_config
from tests.newcomer._cli import WAIT, dsh
from tests.support.provider_server import Reply, serve
from tests.support.provider_wire import oa_text_reply

KEY = "sk-test-first-hour-0123456789"


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


# -- help --------------------------------------------------------------------------------------------------------


def _commands() -> list[tuple[str, object]]:
    import typer

    from dsh.cli import _tidy_help, app

    root = typer.main.get_command(app)
    _tidy_help(root)
    out: list[tuple[str, object]] = []

    def walk(path: str, command: object) -> None:
        out.append((path, command))
        for name, sub in getattr(command, "commands", {}).items():
            walk(f"{path} {name}", sub)

    walk("dsh", root)
    return out


def test_help_texts_have_no_hard_wraps() -> None:
    wrapped = [
        path for path, command in _commands() if "\n" in (getattr(command, "help", None) or "").replace("\n\n", "")
    ]
    assert wrapped == []


def test_every_group_names_every_sub_command_in_its_help() -> None:
    import re

    missing = [
        f"{path} {name}"
        for path, command in _commands()
        if path != "dsh"
        for name in getattr(command, "commands", {})
        if not re.search(rf"\b{name}\b", getattr(command, "help", "") or "")
    ]
    assert missing == []


def test_sessions_help_lists_fork_and_prune(tmp_path: Path) -> None:
    shown = dsh(tmp_path, "sessions", "--help").stdout
    assert " fork " in shown and " prune " in shown and "fork and prune them" in shown


def test_chat_help_is_typers_and_knows_the_options_the_chat_parses(tmp_path: Path) -> None:
    from dsh.chat._cli import _parser

    shown = dsh(tmp_path, "chat", "--help")
    assert shown.returncode == 0 and "Usage: dsh chat [OPTIONS]" in shown.stdout and "╭─ Options" in shown.stdout
    argparse_options = {o for action in _parser()._actions for o in action.option_strings}
    chat = dict(_commands())["dsh chat"]
    typer_options = {o for param in getattr(chat, "params", []) for o in param.opts}
    assert argparse_options == typer_options and "--resume" in typer_options
    bad = dsh(tmp_path, "chat", "--bogus")
    assert bad.returncode == 2 and bad.stderr == "dsh chat: unrecognized arguments: --bogus (see `dsh chat --help`)\n"


# -- plan mode ---------------------------------------------------------------------------------------------------


def test_plan_mode_refuses_an_edit_before_matching_it(tmp_path: Path) -> None:
    from tests.support.env import write_script

    (tmp_path / "f.txt").write_text("hello\n")
    absent = {"name": "edit_file", "arguments": {"path": "f.txt", "old_string": "absent", "new_string": "x"}}
    model = write_script(tmp_path / "s.json", [{"tool_calls": [absent]}, {"text": "ok"}])
    done = dsh(tmp_path, "exec", "--mode", "plan", "--model", model, "go")
    assert done.returncode == 1, done.stderr  # a refused call fails the run
    assert "refused edit_file: Plan mode is on" in done.stderr
    assert "old_string not found" not in done.stderr
    assert (tmp_path / "f.txt").read_text() == "hello\n"


# -- dsh mcp check -----------------------------------------------------------------------------------------------


def test_mcp_check_tells_not_found_from_no_answer(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "mcp_servers:\n"
        "  gone:\n    command: no-such-mcp-server-43\n"
        "  gone-path:\n    command: ./bin/nothing-here\n"
        f"  mute:\n    command: {sys.executable}\n    args: ['-c', 'import time; time.sleep(60)']\n    timeout: 1\n"
    )
    done = dsh(tmp_path, "mcp", "check", "--config", str(config))
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        "FAIL  gone (stdio): command not found: no-such-mcp-server-43 (not on PATH)",
        "FAIL  gone-path (stdio): command not found: ./bin/nothing-here",
        "FAIL  mute (stdio): no answer within 1 s",
    ]


# -- the test cache ----------------------------------------------------------------------------------------------


def test_pytest_last_failed_is_available(tmp_path: Path) -> None:
    """``pytest --lf`` reruns what failed (issue 43): the cache provider is not disabled in the project's config."""
    from tests.support.env import ROOT

    probe = tmp_path / "test_probe.py"
    probe.write_text("import os\n\ndef test_a():\n    assert os.environ.get('PROBE_PASS')\n\ndef test_b():\n    pass\n")
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-c", str(ROOT / "pyproject.toml")]
    args += ["--rootdir", str(tmp_path), "-o", f"cache_dir={tmp_path / 'cache'}", str(probe)]
    first = subprocess.run(args, capture_output=True, text=True, timeout=WAIT, cwd=tmp_path)
    assert first.returncode == 1 and "1 failed, 1 passed" in first.stdout, first.stdout + first.stderr
    again = subprocess.run([*args, "--lf"], capture_output=True, text=True, timeout=WAIT, cwd=tmp_path)
    assert "1 failed" in again.stdout and "1 deselected" in again.stdout, again.stdout + again.stderr
