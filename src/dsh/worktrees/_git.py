"""Running git for the worktrees: an argv (never a shell), our own pipes, a cleaned environment.

Guarantees:

* git never writes to dsh's stdout (the protocol's): stdout and stderr are pipes read here, stdin is
  ``/dev/null`` and ``GIT_TERMINAL_PROMPT=0`` (git never waits for a password).
* The environment is :func:`dsh.secrets.child_environment` (no provider key, no withheld secret) with git's
  program-running configuration neutralised (:func:`dsh.sandbox.git_environment`: no hook, no fsmonitor, no
  filter or diff driver of the repository runs), ``LC_ALL=C`` (messages we parse are English) and without the
  variables that would point git at another repository or index (``GIT_DIR``, ``GIT_WORK_TREE``, ...).
* No git, or a git that cannot be started: :class:`GitMissing`, never an ``OSError`` of the caller's.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

from dsh.worktrees._options import WorktreeError

__all__ = ["REDIRECTING", "GitMissing", "GitResult", "git", "git_program"]

REDIRECTING = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
    "GIT_EXEC_PATH",
    "GIT_CONFIG",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_EXTERNAL_DIFF",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_ASKPASS",
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
    "GIT_TRACE",
)
"""Variables of the daemon's environment that would make git act on another repository, index or object store,
or run another program, than the one the worktree is made for: dropped."""

TIMEOUT = 120.0
"""Seconds one git command may take (a checkout of a large tree included) before it is killed."""


class GitMissing(WorktreeError):
    """git is not installed (not on ``PATH``) or cannot be started (code ``GIT_MISSING``)."""


@dataclass(frozen=True, slots=True)
class GitResult:
    code: int
    out: str
    err: str

    @property
    def ok(self) -> bool:
        return self.code == 0

    def reason(self) -> str:
        """git's own last words (its stderr's last line), for a message."""
        lines = [line.strip() for line in (self.err or self.out).splitlines() if line.strip()]
        return lines[-1].removeprefix("fatal: ").removeprefix("error: ") if lines else f"git exited {self.code}"


def git_program() -> str:
    """The git on ``PATH``; raises :class:`GitMissing` without one."""
    found = shutil.which("git")
    if found is None:
        raise GitMissing("git is not installed (no `git` on PATH): a worktree session needs git", "GIT_MISSING")
    return found


def _environment(cwd: str) -> dict[str, str]:
    from dsh.sandbox import git_environment
    from dsh.secrets import child_environment

    env = {key: value for key, value in child_environment().items() if key not in REDIRECTING}
    env.update({"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "LANGUAGE": "C", "GIT_OPTIONAL_LOCKS": "0"})
    return git_environment(env, cwd)


def git(args: list[str], cwd: str) -> GitResult:
    """Run ``git ARGS`` in *cwd* (blocking: call it in a worker thread) and return what it said. Callers put
    ``--`` (or ``--end-of-options``) before anything a client gave, and validate names before they get here."""
    program = git_program()
    try:
        done = subprocess.run(
            [program, *args],
            cwd=cwd,
            env=_environment(cwd),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=TIMEOUT,
            check=False,
        )
    except FileNotFoundError as exc:
        raise GitMissing(f"git cannot be started: {exc}", "GIT_MISSING") from None
    except subprocess.TimeoutExpired:
        return GitResult(124, "", f"git {args[0]} did not finish within {TIMEOUT:.0f} s")
    return GitResult(done.returncode, done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace"))
