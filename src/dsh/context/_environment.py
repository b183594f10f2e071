"""The session's environment, computed once (session start, resume, load) and never on the per-step path.

Guarantees: no subprocess is started here (git's branch is read from ``.git/HEAD``, worktrees' ``gitdir:`` files
followed; the status summary comes from :mod:`dsh.context._gitstatus`, run once off the per-step path); every file-system failure degrades to "unknown" instead of failing the session; the date has day
granularity and is not rendered: it can change mid-session, so it reaches the model as a message
(:mod:`dsh.context._notes`); the rendered section is byte-identical for the whole life of a session.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dsh.context._gitstatus import GitSummary

__all__ = ["Environment", "GitInfo", "find_git", "snapshot"]


@dataclass(frozen=True, slots=True)
class GitInfo:
    root: str
    branch: str | None
    """The checked-out branch; ``detached at <sha>`` when HEAD names a commit; None when unreadable."""


@dataclass(frozen=True, slots=True)
class Environment:
    cwd: str
    roots: tuple[str, ...]
    system: str
    shell: str | None
    today: str
    git: GitInfo | None

    def render(self, git: GitSummary | None = None) -> str:
        """The section's text; *git*: the status summary (:mod:`dsh.context._gitstatus`), when known."""
        lines = ["# Environment", f"Working directory: {self.cwd}"]
        if self.roots:
            lines.append("Additional directories: " + ", ".join(self.roots))
        lines.append(f"Platform: {self.system}")
        if self.shell:
            lines.append(f"Shell: {self.shell}")
        if self.git is None:
            lines.append("Git repository: no (the working directory is not inside a git repository)")
        else:
            branch = f", branch {self.git.branch}" if self.git.branch else ""
            lines.append(f"Git repository: yes, root {self.git.root}{branch}")
            if git is not None:
                lines += git.render()
        return "\n".join(lines)


def _git_dir(dot_git: Path) -> Path | None:
    if dot_git.is_dir():
        return dot_git
    try:
        text = dot_git.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    if text.startswith("gitdir:"):
        target = Path(text[len("gitdir:") :].strip())
        return target if target.is_absolute() else (dot_git.parent / target)
    return None


def find_git(cwd: str) -> GitInfo | None:
    """The git repository containing *cwd* (the nearest ancestor with a ``.git``), with its branch."""
    try:
        start = Path(cwd).resolve()
    except OSError:
        return None
    for directory in (start, *start.parents):
        dot_git = directory / ".git"
        if not dot_git.exists():
            continue
        git_dir = _git_dir(dot_git)
        branch: str | None = None
        if git_dir is not None:
            try:
                head = (git_dir / "HEAD").read_text(encoding="utf-8", errors="replace").strip()
            except OSError:
                head = ""
            if head.startswith("ref:"):
                ref = head[4:].strip()
                branch = ref.removeprefix("refs/heads/")
            elif head:
                branch = f"detached at {head[:12]}"
        return GitInfo(str(directory), branch)
    return None


def snapshot(cwd: str, roots: tuple[str, ...] = (), *, today: date | None = None) -> Environment:
    """The environment of a session in *cwd* now."""
    system = f"{platform.system() or 'unknown'} {platform.release()}".strip()
    return Environment(
        cwd=cwd,
        roots=roots,
        system=system,
        shell=os.environ.get("SHELL") or os.environ.get("COMSPEC"),
        today=(today or date.today()).isoformat(),
        git=find_git(cwd),
    )
