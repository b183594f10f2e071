"""Listing and searching a directory tree: glob matching, a bounded walk, ripgrep and its Python fallback.

These only *list* and *search*; reading or changing a file's content goes through the workspace seam. Every
walk skips :data:`SKIP_DIRS` and never follows symlinked directories (a link cannot lead a listing out of the
session's roots). Walks run in a worker thread and stop early when the call's signal aborts.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from dsh.tools._process import run_process

if TYPE_CHECKING:
    from dsh.kernel import CancelToken

__all__ = [
    "SKIP_DIRS",
    "GrepOutcome",
    "glob_matcher",
    "grep_python",
    "grep_ripgrep",
    "ripgrep_path",
    "walk_files",
]

SKIP_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", ".venv", "__pycache__", ".mypy_cache", ".ruff_cache"})
"""Directory names never listed or searched: version control, dependencies, caches."""

USE_RIPGREP = True
"""Module switch: False forces the Python fallback of ``grep`` even when ``rg`` is on PATH."""

_BINARY_PROBE = 8192
_MAX_SEARCH_FILE = 16 * 1024 * 1024


def _glob_regex(pattern: str) -> str:
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif char == "*":
            out.append("[^/]*")
            i += 1
        elif char == "?":
            out.append("[^/]")
            i += 1
        elif char == "[":
            end = pattern.find("]", i + 2 if pattern.startswith("[!", i) or pattern.startswith("[^", i) else i + 1)
            if end == -1:
                out.append(re.escape(char))
                i += 1
            else:
                body = pattern[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end + 1
        elif char == "{":
            end = pattern.find("}", i)
            if end == -1:
                out.append(re.escape(char))
                i += 1
            else:
                options = pattern[i + 1 : end].split(",")
                out.append("(?:" + "|".join(_glob_regex(option) for option in options) + ")")
                i = end + 1
        else:
            out.append(re.escape(char))
            i += 1
    return "".join(out)


@lru_cache(maxsize=64)
def glob_matcher(pattern: str) -> re.Pattern[str]:
    """A compiled matcher for a glob over ``/``-separated relative paths: ``*`` and ``?`` stay within one path
    segment, ``**/`` spans any number of directories, ``[abc]`` and ``{a,b}`` as in shells. A pattern without a
    ``/`` matches the file name at any depth (``*.py`` finds every Python file), as ripgrep's ``--glob`` does."""
    pattern = pattern.strip()
    if pattern.startswith("./"):
        pattern = pattern[2:]
    if "/" not in pattern:
        pattern = "**/" + pattern
    return re.compile(_glob_regex(pattern.lstrip("/")), re.DOTALL)


def walk_files(root: str, *, signal: CancelToken | None = None, skip_hidden: bool = False) -> Iterator[tuple[str, str]]:
    """``(absolute path, path relative to root with "/")`` of every file below *root*, in sorted order;
    *root* may itself be a file. Symbolic links are not followed, files or directories (as ripgrep does
    by default): a link must never lead a search out of the session's directory."""
    if os.path.isfile(root):
        yield root, os.path.basename(root)
        return
    for directory, dirs, files in os.walk(root):
        if signal is not None and signal.aborted:
            return
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in SKIP_DIRS
            and not (skip_hidden and d.startswith("."))
            and not os.path.islink(os.path.join(directory, d))
        )
        relative_dir = os.path.relpath(directory, root)
        for name in sorted(files):
            if skip_hidden and name.startswith("."):
                continue
            if os.path.islink(os.path.join(directory, name)):
                continue
            relative = name if relative_dir == "." else f"{relative_dir}/{name}".replace(os.sep, "/")
            yield os.path.join(directory, name), relative


# -- grep -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GrepOutcome:
    """Matches as ``path:line:text`` (path relative to the search's working directory); ``truncated``: there
    were more than the cap; ``error``: the search could not run (a bad pattern)."""

    lines: list[str]
    truncated: bool = False
    error: str | None = None


def ripgrep_path() -> str | None:
    """The ``rg`` executable to use, or None (not on PATH, or switched off by :data:`USE_RIPGREP`)."""
    return shutil.which("rg") if USE_RIPGREP else None


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width] + " …"


async def grep_ripgrep(
    rg: str,
    pattern: str,
    target: str,
    *,
    cwd: str,
    glob: str | None,
    ignore_case: bool,
    max_matches: int,
    line_width: int,
    signal: CancelToken | None,
    timeout: float = 60.0,  # noqa: ASYNC109 - ripgrep's deadline, enforced by run_process
) -> GrepOutcome:
    """Search with ripgrep as a local child process (same rules as any command: no inherited stdin/stdout,
    its own process group, killed on cancel); honours ``.gitignore`` and skips hidden and binary files."""
    argv = [rg, "--no-heading", "--with-filename", "--line-number", "--color=never", "--no-messages"]
    argv += ["--sort=path", "--no-config"]
    if ignore_case:
        argv.append("--ignore-case")
    for name in sorted(SKIP_DIRS):
        argv += ["--glob", f"!{name}"]
    if glob:
        argv += ["--glob", glob]
    argv += ["--regexp", pattern, "--", target]
    result = await run_process(
        argv,
        cwd=cwd,
        timeout=timeout,
        output_limit=max_matches * (line_width + 256),
        signal=signal,
        keep="head",
        stop_when_full=True,
    )
    if result.cancelled:
        return GrepOutcome([], error="cancelled")
    if result.exit_code == 2 and not result.truncated:
        message = result.output.strip() or "ripgrep failed"
        return GrepOutcome([], error=message)
    lines = result.output.splitlines()
    if result.truncated and lines:
        lines.pop()  # the cut may have split the last line
    truncated = result.truncated or result.timed_out or len(lines) > max_matches
    out = []
    for line in lines[:max_matches]:
        if line.startswith("./"):
            line = line[2:]
        out.append(_shorten(line, line_width))
    return GrepOutcome(out, truncated)


def grep_python(
    pattern: str,
    target: str,
    *,
    cwd: str,
    glob: str | None,
    ignore_case: bool,
    max_matches: int,
    line_width: int,
    signal: CancelToken | None,
) -> GrepOutcome:
    """The fallback without ripgrep (blocking: run it in a worker thread): Python ``re`` over UTF-8 text files,
    skipping hidden, binary, undecodable and very large files."""
    try:
        regex = re.compile(pattern, re.MULTILINE | (re.IGNORECASE if ignore_case else 0))
    except re.error as exc:
        return GrepOutcome([], error=f"invalid regular expression {pattern!r}: {exc}")
    matcher = glob_matcher(glob) if glob else None
    out: list[str] = []
    for path, relative in walk_files(target, signal=signal, skip_hidden=True):
        if matcher is not None and not matcher.fullmatch(relative):
            continue
        try:
            if os.path.getsize(path) > _MAX_SEARCH_FILE:
                continue
            with open(path, "rb") as file:
                data = file.read()
        except OSError:
            continue
        if b"\0" in data[:_BINARY_PROBE]:
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if regex.search(text) is None:
            continue
        shown = os.path.relpath(path, cwd).replace(os.sep, "/")
        if shown.startswith("../"):
            shown = path
        for number, line in enumerate(text.splitlines(), 1):
            if regex.search(line):
                if len(out) == max_matches:
                    return GrepOutcome(out, truncated=True)
                out.append(_shorten(f"{shown}:{number}:{line}", line_width))
        if signal is not None and signal.aborted:
            break
    if signal is not None and signal.aborted:
        return GrepOutcome(out, error="cancelled")
    return GrepOutcome(out)
