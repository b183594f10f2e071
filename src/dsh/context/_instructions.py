"""Project instructions: ``AGENTS.md`` files (or ``CLAUDE.md`` where no ``AGENTS.md`` stands beside it) from the
repository root down to the working directory, after the user's own ``AGENTS.md`` in the dsh config directory.

Guarantees: read once per session (start, resume, load); the most general file comes first and the most
specific last (the model reads later text as overriding); the whole text is capped at ``cap`` characters and a
cut is visible to the model (a note says which file was cut and by how much); unreadable files are skipped.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["DEFAULT_CAP", "Instructions", "find_instruction_files", "load_instructions", "user_config_dir"]

DEFAULT_CAP = 32_000
"""Characters of project instructions at most (about 8,000 tokens)."""
NAMES = ("AGENTS.md", "CLAUDE.md")


def user_config_dir() -> Path:
    """``$XDG_CONFIG_HOME/dsh`` (``~/.config/dsh``): where the user's own ``AGENTS.md`` lives."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "dsh"


@dataclass(frozen=True, slots=True)
class Instructions:
    text: str
    """The rendered section ("" when there is no file)."""
    files: tuple[str, ...] = ()
    truncated: tuple[str, ...] = field(default=())
    """The files that were cut (or left out) by the cap."""


def _pick(directory: Path) -> Path | None:
    for name in NAMES:
        candidate = directory / name
        if candidate.is_file():
            return candidate
    return None


def find_instruction_files(cwd: str, repo_root: str | None, config_dir: Path | None = None) -> list[Path]:
    """The files to use, most general first: the user's, then the repository root's … down to *cwd*'s."""
    files: list[Path] = []
    user = _pick(config_dir if config_dir is not None else user_config_dir())
    if user is not None and user.name == "AGENTS.md":
        files.append(user)
    start = Path(cwd)
    chain = [start]
    if repo_root is not None:
        root = Path(repo_root)
        for parent in start.parents:
            if not (parent == root or root in parent.parents):
                break
            chain.append(parent)
    for directory in reversed(chain):
        found = _pick(directory)
        if found is not None and found not in files:
            files.append(found)
    return files


def load_instructions(files: list[Path], cap: int = DEFAULT_CAP) -> Instructions:
    """Read *files* into the project-instructions section, at most *cap* characters of file text."""
    parts: list[str] = []
    used: list[str] = []
    cut: list[str] = []
    left = cap
    for path in files:
        try:
            text = path.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            continue
        if not text:
            continue
        used.append(str(path))
        if left <= 0:
            cut.append(str(path))
            parts.append(f"## {path}\n[left out: {len(text)} characters; project instructions are capped at {cap}]")
            continue
        if len(text) > left:
            cut.append(str(path))
            text = (
                text[:left]
                + f"\n[truncated: {len(text) - left} of {len(text)} characters of this file left out; project "
                f"instructions are capped at {cap} characters. Read the file itself if you need the rest.]"
            )
            left = 0
        else:
            left -= len(text)
        parts.append(f"## {path}\n{text}")
    if not parts:
        return Instructions("")
    head = (
        "# Project instructions\n"
        "Instructions from the user and the project (AGENTS.md files). Follow them; where they disagree, the "
        "later (more specific) file wins."
    )
    return Instructions("\n\n".join([head, *parts]), tuple(used), tuple(cut))
