"""Real git repositories for the worktree tests, and the daemon set up for them.

``make_repo`` makes a repository with one commit (``shared.txt`` = ``base\\n``) using the runner's git with a
fixed identity; ``git`` runs git there and returns its stdout (raising on failure); ``configure`` writes the
daemon's configuration file under the test's HOME (as :func:`tests.support.env.sandbox_env` lays it out).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["IDENTITY", "call", "configure", "git", "make_repo", "present", "script", "worktree_meta"]

IDENTITY = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
}


def git(cwd: Path | str, *args: str, check: bool = True) -> str:
    env = {**os.environ, **IDENTITY}
    for key in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        env.pop(key, None)
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed in {cwd}: {done.stderr}")
    return done.stdout


def make_repo(path: Path, *, commit: bool = True) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    if commit:
        (path / "shared.txt").write_text("base\n", encoding="utf-8")
        git(path, "add", "shared.txt")
        git(path, "commit", "-q", "-m", "base")
    return path


def configure(workdir: Path, text: str) -> None:
    config = workdir / "home" / ".config" / "dsh" / "config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(text, encoding="utf-8")


def call(name: str, call_id: str, **arguments: Any) -> dict[str, Any]:
    """A scripted-model step that calls one tool."""
    return {"tool_calls": [{"name": name, "arguments": arguments, "id": call_id}]}


def script(path: Path, steps: list[dict[str, Any]]) -> str:
    path.write_text(json.dumps(steps), encoding="utf-8")
    return f"scripted:{path}"


def worktree_meta(result: dict[str, Any]) -> dict[str, Any]:
    """``_meta.dsh.worktree`` of a raw result."""
    meta = result.get("_meta") or {}
    return dict((meta.get("dsh") or {}).get("worktree") or {})


def present(path: Path | str) -> bool:
    """Whether *path* exists (a plain function: the async tests call it between awaits)."""
    return Path(path).exists()
