"""The git status summary of the environment section: branch, ahead/behind, changed files, last commits.

Computed once per session (start, resume, load) by two short ``git`` commands run as local child processes
(:func:`dsh.tools.run_process`: no inherited stdin or stdout, killed at the deadline), never on the per-step
path. The environment section waits for it before the session's first request, bounded by
:data:`GIT_DEADLINE`: past it, or when git is missing or fails, the summary is left out for the whole session
(the section stays byte-identical from step to step either way).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass

__all__ = ["GIT_DEADLINE", "GitSummary", "git_summary"]

GIT_DEADLINE = 3.0
"""Seconds the two git commands may take together."""

RECENT_COMMITS = 5


@dataclass(frozen=True, slots=True)
class GitSummary:
    branch: str | None
    upstream: str | None
    ahead: int
    behind: int
    changed: int
    untracked: int
    commits: tuple[str, ...]
    """The last few commit subjects, newest first (``<short sha> <subject>``)."""

    def render(self) -> list[str]:
        lines = []
        status = f"Git status: branch {self.branch or '(detached)'}"
        if self.upstream:
            status += f", tracking {self.upstream}"
            if self.ahead or self.behind:
                status += f" (ahead {self.ahead}, behind {self.behind})"
            else:
                status += " (up to date)"
        if self.changed or self.untracked:
            status += f"; {self.changed} changed file{'s' if self.changed != 1 else ''}"
            status += f", {self.untracked} untracked"
        else:
            status += "; working tree clean"
        lines.append(status)
        if self.commits:
            lines.append("Recent commits:")
            lines += [f"  {commit}" for commit in self.commits]
        return lines


def _parse_status(text: str) -> tuple[str | None, str | None, int, int, int, int]:
    branch = upstream = None
    ahead = behind = changed = untracked = 0
    for line in text.splitlines():
        if line.startswith("# branch.head "):
            head = line[len("# branch.head ") :].strip()
            branch = None if head == "(detached)" else head
        elif line.startswith("# branch.upstream "):
            upstream = line[len("# branch.upstream ") :].strip()
        elif line.startswith("# branch.ab "):
            for part in line[len("# branch.ab ") :].split():
                if part.startswith("+"):
                    ahead = int(part[1:] or 0)
                elif part.startswith("-"):
                    behind = int(part[1:] or 0)
        elif line.startswith(("1 ", "2 ", "u ")):
            changed += 1
        elif line.startswith("? "):
            untracked += 1
    return branch, upstream, ahead, behind, changed, untracked


async def git_summary(root: str) -> GitSummary | None:
    """The summary of the repository at *root*, or None (no git, not a repository, too slow, an error)."""
    import anyio

    from dsh.tools import run_process

    git = shutil.which("git")
    if git is None:
        return None
    with anyio.move_on_after(GIT_DEADLINE):
        status = await run_process(
            [git, "-C", root, "--no-optional-locks", "status", "--porcelain=v2", "--branch"],
            cwd=root,
            timeout=GIT_DEADLINE,
            output_limit=1 << 20,
            keep="head",
        )
        if status.exit_code != 0:
            return None
        log = await run_process(
            [git, "-C", root, "log", f"-{RECENT_COMMITS}", "--format=%h %s", "--no-color"],
            cwd=root,
            timeout=GIT_DEADLINE,
            output_limit=64 * 1024,
            keep="head",
        )
        commits = tuple(line[:120] for line in log.output.splitlines() if line.strip()) if log.exit_code == 0 else ()
        branch, upstream, ahead, behind, changed, untracked = _parse_status(status.output)
        return GitSummary(branch, upstream, ahead, behind, changed, untracked, commits)
    return None
