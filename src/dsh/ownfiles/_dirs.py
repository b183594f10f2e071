"""Where dsh looks for the Markdown files it reads on its own (commands, sub-agent types), one place for both."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

__all__ = ["markdown_files", "project_dirs", "user_config_dir"]


def user_config_dir() -> Path:
    """``$XDG_CONFIG_HOME/dsh``, else ``~/.config/dsh`` (whether or not it exists): the one place that says where
    the user's own dsh files live (``config.yaml``, ``AGENTS.md``, ``commands/``, ``agents/``)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "dsh"


def project_dirs(cwd: str) -> list[Path]:
    """*cwd* and its ancestors up to the repository root, nearest first (only *cwd* when it is not inside a
    repository): the directories whose ``.dsh/`` folders a session in *cwd* reads."""
    start = Path(cwd)
    chain = [start, *start.parents]
    for index, directory in enumerate(chain):
        if (directory / ".git").exists():
            return chain[: index + 1]
    return [start]


def markdown_files(directory: Path, name: re.Pattern[str]) -> Iterator[tuple[str, Path]]:
    """``(stem, path)`` for each entry of *directory* whose whole name matches *name* (its group 1 is the stem),
    in name order; directories are skipped, anything else is yielded for :func:`read_inside` to refuse loudly
    (a symlink out, a FIFO). A missing or unreadable directory yields nothing."""
    try:
        entries = sorted(directory.iterdir())
    except OSError:
        return
    for path in entries:
        match = name.fullmatch(path.name)
        if match is not None and not path.is_dir():
            yield match.group(1), path
