"""Which files a listing or a search skips: ``.gitignore`` rules, version control, dependency and cache
directories, and hidden entries, as ripgrep decides it.

Guarantees:

* :class:`IgnoreRules` reads the ``.gitignore`` (and ``.ignore``) files of the walk's root, of its parent
  directories up to the enclosing repository's top (the directory holding ``.git``), the repository's
  ``.git/info/exclude``, and the ``.gitignore`` of every directory the walk enters; the deepest file that has a
  rule for a path decides, and a negation (``!keep.log``) re-includes, as git does. The rules apply whether or
  not the directory is a git repository (ripgrep's ``--no-require-git``, which the ripgrep path passes too),
  so both engines agree. Patterns are parsed by :mod:`pathspec` (git's wildmatch rules, the well-kept
  implementation every Python tool uses), never by hand.
* :data:`SKIP_DIRS` are never entered, ignored or not: ``.git``, ``node_modules``, virtualenvs, caches.
* An unreadable ignore file is treated as empty (a search is never refused for it).
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathspec import GitIgnoreSpec

__all__ = ["IGNORE_FILES", "SKIP_DIRS", "IgnoreRules"]

SKIP_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", ".venv", "__pycache__", ".mypy_cache", ".ruff_cache"})
"""Directory names never listed or searched: version control, dependencies, caches."""

IGNORE_FILES = (".gitignore", ".ignore")


@lru_cache(maxsize=256)
def _spec_of(path: str, mtime_ns: int) -> GitIgnoreSpec | None:
    from pathspec import GitIgnoreSpec

    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            lines = file.read().splitlines()
    except OSError:
        return None
    lines = [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
    return GitIgnoreSpec.from_lines(lines) if lines else None


def _load(path: str) -> GitIgnoreSpec | None:
    try:
        mtime = os.stat(path).st_mtime_ns
    except OSError:
        return None
    return _spec_of(path, mtime)


def _repository_top(start: str) -> str | None:
    directory = start
    while True:
        if os.path.exists(os.path.join(directory, ".git")):
            return directory
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


class IgnoreRules:
    """The ignore rules in force below *root* (an absolute directory); :meth:`enter` adds a directory's own
    files as a walk reaches it."""

    def __init__(self, root: str) -> None:
        self._specs: dict[str, list[GitIgnoreSpec]] = {}
        root = os.path.abspath(root)
        top = _repository_top(root)
        chain = [root]
        if top is not None:
            directory = root
            while directory != top:
                directory = os.path.dirname(directory)
                chain.append(directory)
            exclude = _load(os.path.join(top, ".git", "info", "exclude"))
            if exclude is not None:
                self._specs.setdefault(top, []).append(exclude)
        for directory in reversed(chain):
            self.enter(directory)

    def enter(self, directory: str) -> None:
        """Read *directory*'s own ignore files (once)."""
        for name in IGNORE_FILES:
            spec = _load(os.path.join(directory, name))
            if spec is not None:
                specs = self._specs.setdefault(directory, [])
                if spec not in specs:
                    specs.append(spec)

    def ignored(self, path: str, *, is_dir: bool) -> bool:
        """Whether the absolute *path* is ignored: the deepest directory with a rule that matches decides."""
        directory = os.path.dirname(path)
        while True:
            specs = self._specs.get(directory)
            if specs:
                relative = os.path.relpath(path, directory).replace(os.sep, "/") + ("/" if is_dir else "")
                for spec in reversed(specs):
                    result: Any = spec.check_file(relative)
                    if result.include is not None:
                        return bool(result.include)
            parent = os.path.dirname(directory)
            if parent == directory:
                return False
            directory = parent
