"""Every command's environment keeps git from running a program the repository configured: ``git status`` and
``git diff`` in a repository whose own configuration names an fsmonitor, a pager, a diff driver's textconv and
command, a filter and an external diff never run them (each would leave a marker file)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from dsh.sandbox import git_environment


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, timeout=60, check=False)


def test_git_status_and_diff_run_no_program_the_repository_configured(tmp_path: Path) -> None:
    repo, markers = tmp_path / "repo", tmp_path / "markers"
    repo.mkdir()
    markers.mkdir()
    base = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    base |= {"HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"}
    git(repo, "init", "-q", env=base)
    (repo / "a.txt").write_text("one\n", encoding="utf-8")
    git(repo, "add", "a.txt", env=base)
    git(repo, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-qm", "x", env=base)
    script = tmp_path / "evil.sh"
    script.write_text(f'#!/bin/sh\ntouch "{markers}/$1-ran"\ncat "$2" 2>/dev/null\n', encoding="utf-8")
    script.chmod(0o755)
    (repo / ".gitattributes").write_text("*.txt diff=evil filter=evil\n", encoding="utf-8")
    with (repo / ".git" / "config").open("a", encoding="utf-8") as config:
        config.write(
            f"[core]\n\tfsmonitor = {script} fsmonitor\n\tpager = {script} pager\n"
            f'[diff "evil"]\n\ttextconv = {script} textconv\n\tcommand = {script} command\n'
            f'[filter "evil"]\n\tclean = {script} clean\n\tsmudge = {script} smudge\n'
            f"[diff]\n\texternal = {script} external\n"
        )
    (repo / "a.txt").write_text("two\n", encoding="utf-8")
    env = git_environment(base, str(repo))
    status = git(repo, "status", "--short", env=env)
    diff = git(repo, "diff", "--no-ext-diff", env=env)
    git(repo, "diff", env=env)  # with the external diff: it fails instead of running anything
    assert "a.txt" in status.stdout
    assert "+two" in diff.stdout
    assert sorted(os.listdir(markers)) == []
    # the same repository without the environment does run them: the test can fail
    git(repo, "diff", env=base)
    assert os.listdir(markers) != []
