"""Issue #11: CI runs every test (ripgrep installed, so the ripgrep variants do not skip) and the README's first
screen stays three commands (issue 27 added `make install chat`), with the ``uvx`` form next to the venv path in "Use it from an editor"."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ci_installs_ripgrep_then_runs_exactly_make_test_and_fails_on_no_tests() -> None:
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    commands = [line.strip() for line in script.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert commands.count("make test") == 1
    runs_pytest = [line for line in commands if re.match(r"(\S*/)?(python3?|pytest)\b.*pytest", line)]
    assert runs_pytest == []  # nothing but the README's command runs the tests
    install = next(i for i, line in enumerate(commands) if "pip install" in line and "ripgrep" in line)
    assert "--only-binary" in commands[install]  # a wheel from PyPI, never a Rust build
    assert install < commands.index('export PATH="$PWD/.venv/bin:$PATH"') < commands.index("make test")
    assert 'if [ "$status" -eq 5 ]; then' in commands


@pytest.mark.skipif(os.environ.get("CI") != "true", reason="CI (CI=true) must have ripgrep; a developer may not")
def test_ci_has_ripgrep_so_no_ripgrep_variant_skips() -> None:
    assert shutil.which("rg") is not None


def readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.mark.skipif(os.environ.get("CI") != "true", reason="CI (CI=true) must have tmux; a developer may not")
def test_ci_has_tmux_so_the_terminal_chat_tests_run() -> None:
    assert shutil.which("tmux") is not None


def test_ci_installs_tmux_with_apt_get_when_missing() -> None:
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "apt-get update" in script and "apt-get install -y -qq tmux" in script
    assert script.index("apt-get update") < script.index("apt-get install") < script.index("make test")


def test_the_first_screen_is_three_commands() -> None:
    first = re.search(r"```sh\n(.*?)```", readme(), re.S)
    assert first is not None
    commands = [line for line in first.group(1).splitlines() if line.strip()]
    assert [line.split("#")[0].strip() for line in commands] == ["make install chat", "make install run", "make test"]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "\nchat: install\n\t$(BIN)/dsh chat\n" in makefile
    assert readme().index("```sh") < readme().index("## ")  # before any section


def test_use_it_from_an_editor_shows_uvx_next_to_the_venv_path() -> None:
    text = readme()
    section = text.split("## Use it from an editor", 1)[1].split("\n## ", 1)[0]
    assert '"command": "uvx", "args": ["dsh-agent", "acp"]' in section
    assert '"command": "/absolute/path/to/dsh/.venv/bin/dsh"' in section
    assert "`uvx dsh-agent acp`" in section
