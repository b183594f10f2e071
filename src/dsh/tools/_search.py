"""Listing and searching a directory tree: glob matching, a bounded walk honouring ignore rules, ripgrep and
its Python fallback, a one-directory listing and the glob search.

These only *list* and *search*; reading or changing a file's content goes through the workspace seam. Every
walk skips :data:`SKIP_DIRS`, what ``.gitignore`` files ignore (:mod:`dsh.tools._ignore`) and hidden entries
where ripgrep would, and never follows symlinked directories (a link cannot lead a listing out of the
session's roots). Walks run in a worker thread and stop early when the call's signal aborts.

Results are ordered most recently modified first (ties by path), whichever engine ran: what the model most
likely wants is what changed last, and the order must not depend on whether ``rg`` is installed.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from dsh.globs import Glob, GlobError, compile_glob
from dsh.tools._ignore import SKIP_DIRS, IgnoreRules
from dsh.tools._process import run_process
from dsh.tools._regular import NotRegularFileError, open_regular

if TYPE_CHECKING:
    from dsh.kernel import CancelToken

__all__ = [
    "FILE_TYPES",
    "SKIP_DIRS",
    "GrepOutcome",
    "GrepQuery",
    "glob_files",
    "grep_python",
    "grep_ripgrep",
    "list_directory",
    "ripgrep_path",
    "walk_files",
]

USE_RIPGREP = True
"""Module switch: False forces the Python fallback of ``grep`` even when ``rg`` is on PATH."""

_BINARY_PROBE = 8192
_MAX_SEARCH_FILE = 16 * 1024 * 1024
_RG_OUTPUT_LIMIT = 8 * 1024 * 1024

OutputMode = Literal["files_with_matches", "content", "count"]

FILE_TYPES: dict[str, tuple[str, ...]] = {
    "py": ("*.py", "*.pyi"),
    "js": ("*.js", "*.mjs", "*.cjs", "*.jsx"),
    "ts": ("*.ts", "*.tsx", "*.mts", "*.cts"),
    "rust": ("*.rs",),
    "go": ("*.go",),
    "java": ("*.java",),
    "kotlin": ("*.kt", "*.kts"),
    "c": ("*.c", "*.h"),
    "cpp": ("*.cpp", "*.cc", "*.cxx", "*.hpp", "*.hh", "*.hxx", "*.h"),
    "cs": ("*.cs",),
    "rb": ("*.rb",),
    "php": ("*.php",),
    "swift": ("*.swift",),
    "sh": ("*.sh", "*.bash", "*.zsh"),
    "md": ("*.md", "*.markdown"),
    "json": ("*.json",),
    "yaml": ("*.yaml", "*.yml"),
    "toml": ("*.toml",),
    "html": ("*.html", "*.htm"),
    "css": ("*.css", "*.scss", "*.sass", "*.less"),
    "sql": ("*.sql",),
    "txt": ("*.txt",),
}
"""``type`` filters: the same table for both engines (ripgrep gets them as globs), so they agree."""


def _wants_hidden(pattern: str | None) -> bool:
    """A pattern that names a hidden entry (``.github/**``, ``**/.env``) asks for hidden files."""
    if pattern is None:
        return False
    return any(part.startswith(".") and part not in (".", "..") for part in pattern.replace("\\", "/").split("/"))


def walk_files(
    root: str, *, signal: CancelToken | None = None, skip_hidden: bool = False, ignore: bool = True
) -> Iterator[tuple[str, str]]:
    """``(absolute path, path relative to root with "/")`` of every file below *root*, in sorted order;
    *root* may itself be a file. Symbolic links are not followed, files or directories (as ripgrep does
    by default): a link must never lead a search out of the session's directory. With *ignore*, what the
    ``.gitignore`` files ignore is skipped (see :mod:`dsh.tools._ignore`)."""
    if os.path.isfile(root):
        yield root, os.path.basename(root)
        return
    rules = IgnoreRules(root) if ignore else None
    for directory, dirs, files in os.walk(root):
        if signal is not None and signal.aborted:
            return
        if rules is not None and directory != root:
            rules.enter(directory)
        kept = []
        for d in sorted(dirs):
            full = os.path.join(directory, d)
            if d in SKIP_DIRS or (skip_hidden and d.startswith(".")) or os.path.islink(full):
                continue
            if rules is not None and rules.ignored(full, is_dir=True):
                continue
            kept.append(d)
        dirs[:] = kept
        relative_dir = os.path.relpath(directory, root)
        for name in sorted(files):
            if skip_hidden and name.startswith("."):
                continue
            full = os.path.join(directory, name)
            if os.path.islink(full):
                continue
            if rules is not None and rules.ignored(full, is_dir=False):
                continue
            relative = name if relative_dir == "." else f"{relative_dir}/{name}".replace(os.sep, "/")
            yield full, relative


def list_directory(path: str, *, limit: int) -> tuple[list[str], int]:
    """One directory's entries (directories first, with a trailing ``/``; then files, symbolic links with a
    trailing ``@``), skipping
    :data:`SKIP_DIRS` and what ``.gitignore`` ignores; hidden entries are shown (``ls -A``). Returns at most
    *limit* entries and how many there were in all."""
    rules = IgnoreRules(path)
    dirs: list[str] = []
    files: list[str] = []
    with os.scandir(path) as entries:
        for entry in entries:
            is_dir = entry.is_dir(follow_symlinks=False)
            if is_dir and entry.name in SKIP_DIRS:
                continue
            if rules.ignored(entry.path, is_dir=is_dir):
                continue
            link = entry.is_symlink()  # shown, never followed: a link may lead out of the roots
            (dirs if is_dir else files).append(entry.name + ("/" if is_dir else "@" if link else ""))
    names = sorted(dirs) + sorted(files)
    return names[:limit], len(names)


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return 0


def glob_files(
    pattern: str, root: str, *, limit: int, signal: CancelToken | None = None
) -> tuple[list[tuple[str, str]], int]:
    """Files below *root* whose path relative to *root* matches the glob *pattern*, most recently modified
    first (ties by path), honouring ignore rules and skipping hidden entries unless the pattern names one.
    Returns at most *limit* ``(absolute, relative)`` pairs and how many matched in all. The pattern is of the one
    glob dialect (:mod:`dsh.globs`), relative to *root*; :class:`dsh.globs.GlobError` for one it refuses."""
    glob = compile_glob(pattern)
    hidden = _wants_hidden(pattern)
    found = [
        (path, relative)
        for path, relative in walk_files(root, signal=signal, skip_hidden=not hidden)
        if glob.covers(path, root)
    ]
    found.sort(key=lambda pair: (-_mtime(pair[0]), pair[1]))
    return found[:limit], len(found)


# -- grep -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GrepQuery:
    """One search. ``target`` is what to search (relative to ``cwd`` for ripgrep, absolute for the fallback);
    ``before``/``after`` are context lines (content mode only); ``head_limit`` caps the entries returned."""

    pattern: str
    target: str
    cwd: str
    mode: OutputMode = "files_with_matches"
    head_limit: int = 100
    before: int = 0
    after: int = 0
    fixed_strings: bool = False
    case_insensitive: bool = False
    glob: str | None = None
    type: str | None = None
    line_width: int = 400


@dataclass(frozen=True, slots=True)
class GrepOutcome:
    """The entries (file names, ``path:count`` or ``path:line:text`` lines with ``path-line-text`` context and
    ``--`` between groups), at most the query's ``head_limit``; ``total``: how many there were (a lower bound
    when ``capped``: the engine stopped early); ``error``: the search could not run (a bad pattern)."""

    lines: list[str]
    total: int = 0
    capped: bool = False
    error: str | None = None
    everything: list[str] | None = None
    """Every entry, when ``head_limit`` cut some (what the spill file holds)."""


def ripgrep_path() -> str | None:
    """The ``rg`` executable to use, or None (not on PATH, or switched off by :data:`USE_RIPGREP`)."""
    return shutil.which("rg") if USE_RIPGREP else None


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width] + " …"


def _type_globs(query: GrepQuery) -> tuple[str, ...]:
    if query.type is None:
        return ()
    globs = FILE_TYPES.get(query.type.lower().lstrip("."))
    if globs is None:
        raise ValueError(f"unknown type {query.type!r}; known: {', '.join(sorted(FILE_TYPES))} (or use glob)")
    return globs


def _shown_path(path: str, cwd: str) -> str:
    shown = os.path.relpath(path, cwd).replace(os.sep, "/") if os.path.isabs(path) else path
    if shown.startswith("./"):
        shown = shown[2:]
    if shown.startswith("../"):
        shown = path
    return shown


def _absolute(cwd: str, path: str) -> str:
    return os.path.normpath(os.path.join(cwd, path))


def _parent(path: str) -> str:
    return os.path.dirname(path)


class _FileFilter:
    """Which files a search reads: the query's ``glob`` (the one dialect, relative to the searched directory) and
    its ``type`` (any of the type's globs); both must select a file. The same object filters ripgrep's output, so
    the two engines agree whatever ripgrep's own reading of a glob is."""

    def __init__(self, query: GrepQuery, type_globs: tuple[str, ...]) -> None:
        self.glob: Glob | None = compile_glob(query.glob) if query.glob else None
        self.types = tuple(compile_glob(glob) for glob in type_globs)

    def __call__(self, path: str, base: str) -> bool:
        if self.glob is not None and not self.glob.covers(path, base):
            return False
        return not self.types or any(glob.covers(path, base) for glob in self.types)

    def ripgrep_globs(self, cwd: str, base: str, type_globs: tuple[str, ...]) -> list[str]:
        """ripgrep's ``--glob`` arguments, run in *cwd*, searching *base*: a selection at least as wide as this
        filter's (the type's globs and the user's glob both whitelist, so ripgrep takes either; :meth:`__call__`
        then keeps what both select). The user's glob is left out when ripgrep cannot say it."""
        globs = list(type_globs)
        relative = os.path.relpath(base, cwd)
        if self.glob is not None and not relative.startswith(".."):
            user = self.glob.ripgrep_globs("" if relative == "." else relative.replace(os.sep, "/"))
            if user:
                globs += user
        return globs


_Group = tuple[str, list[tuple[int, bool, str]]]
"""A file's shown path and its ``(line, is_match, text)`` lines."""


def _render(groups: list[_Group], query: GrepQuery, counts: dict[str, int], capped: bool) -> GrepOutcome:
    """Order the files by recency and render them for the query's mode, cut at ``head_limit`` (the whole
    rendering is kept in ``everything`` when the cut dropped entries)."""
    groups.sort(key=lambda group: (-_mtime(os.path.join(query.cwd, group[0])), group[0]))
    full: list[str] = []
    if query.mode == "files_with_matches":
        full = [path for path, _lines in groups]
    elif query.mode == "count":
        full = [f"{path}:{counts.get(path, 0)}" for path, _lines in groups]
    else:
        context = bool(query.before or query.after)
        for path, lines in groups:
            last: int | None = None
            for number, is_match, text in lines:
                if context and full and (last is None or number > last + 1) and full[-1] != "--":
                    full.append("--")  # between groups of lines, as grep -C prints
                sep = ":" if is_match else "-"
                full.append(_shorten(f"{path}{sep}{number}{sep}{text}", query.line_width))
                last = number
    out: list[str] = []
    shown = 0
    for line in full:
        if line != "--":
            if shown >= query.head_limit:
                break
            shown += 1
        out.append(line)
    while out and out[-1] == "--":
        out.pop()
    total = sum(1 for line in full if line != "--")
    return GrepOutcome(out, total, capped, everything=full if total > shown else None)


async def grep_ripgrep(
    rg: str,
    query: GrepQuery,
    *,
    signal: CancelToken | None,
    timeout: float = 60.0,  # noqa: ASYNC109 - ripgrep's deadline, enforced by run_process
) -> GrepOutcome:
    """Search with ripgrep as a local child process (same rules as any command: no inherited stdin/stdout,
    its own process group, killed on cancel); honours ``.gitignore`` (in a repository or not) and skips hidden
    and binary files."""
    try:
        type_globs = _type_globs(query)
        selected_by = _FileFilter(query, type_globs)
    except ValueError as exc:  # an unknown type, a refused glob
        return GrepOutcome([], error=str(exc))
    import anyio

    target = _absolute(query.cwd, query.target)
    base = target if await anyio.Path(target).is_dir() else _parent(target)
    argv = [rg, "--no-heading", "--with-filename", "--line-number", "--color=never", "--no-messages", "--null"]
    argv += ["--sort=path", "--no-config", "--no-require-git"]
    if query.case_insensitive:
        argv.append("--ignore-case")
    if query.fixed_strings:
        argv.append("--fixed-strings")
    if query.mode == "files_with_matches":
        argv.append("--files-with-matches")
    elif query.mode == "count":
        argv.append("--count")
    else:
        if query.before:
            argv += ["--before-context", str(query.before)]
        if query.after:
            argv += ["--after-context", str(query.after)]
    for name in sorted(SKIP_DIRS):
        argv += ["--glob", f"!{name}"]
    for glob in selected_by.ripgrep_globs(query.cwd, base, type_globs):
        argv += ["--glob", glob]
    argv += ["--regexp", query.pattern, "--", query.target]
    result = await run_process(
        argv,
        cwd=query.cwd,
        timeout=timeout,
        output_limit=_RG_OUTPUT_LIMIT,
        signal=signal,
        keep="head",
        stop_when_full=True,
    )
    if result.cancelled:
        return GrepOutcome([], error="cancelled")
    if result.exit_code == 2 and not result.truncated and "\0" not in result.output:
        return GrepOutcome([], error=result.output.strip() or "ripgrep failed")
    groups: dict[str, list[tuple[int, bool, str]]] = {}
    counts: dict[str, int] = {}
    if query.mode == "files_with_matches":  # with --null, each name ends with a NUL and no newline
        names = result.output.split("\0")
        if result.truncated or names[-1].strip():
            names.pop()  # the cut may have split the last name
        for name in names:
            name = name.strip("\n")
            if name.strip() and selected_by(os.path.join(query.cwd, name), base):
                groups[_shown_path(name, ".")] = []
        return _render(list(groups.items()), query, counts, result.truncated or result.timed_out)
    raw = result.output.split("\n")
    if result.truncated and raw:
        raw.pop()  # the cut may have split the last line
    for line in raw:
        if not line or line == "--":
            continue
        path, nul, rest = line.partition("\0")
        if not nul or not selected_by(os.path.join(query.cwd, path), base):
            continue
        shown = _shown_path(path, ".")
        lines = groups.setdefault(shown, [])
        if query.mode == "count":
            counts[shown] = int(rest or 0)
            continue
        match = re.match(r"(\d+)([:-])", rest)
        if match is None:
            continue
        lines.append((int(match.group(1)), match.group(2) == ":", rest[match.end() :].removesuffix("\r")))
    return _render(list(groups.items()), query, counts, result.truncated or result.timed_out)


def grep_python(query: GrepQuery, *, signal: CancelToken | None) -> GrepOutcome:
    """The fallback without ripgrep (blocking: run it in a worker thread): Python ``re`` over UTF-8 text files,
    skipping hidden, ignored, binary, undecodable and very large files. ``query.target`` is absolute."""
    try:
        type_globs = _type_globs(query)
        source = re.escape(query.pattern) if query.fixed_strings else query.pattern
        regex = re.compile(source, re.MULTILINE | (re.IGNORECASE if query.case_insensitive else 0))
    except re.error as exc:
        return GrepOutcome([], error=f"invalid regular expression {query.pattern!r}: {exc}")
    except ValueError as exc:  # an unknown type
        return GrepOutcome([], error=str(exc))
    try:
        selected_by = _FileFilter(query, type_globs)
    except GlobError as exc:
        return GrepOutcome([], error=str(exc))
    base = query.target if os.path.isdir(query.target) else os.path.dirname(query.target)
    groups: list[_Group] = []
    counts: dict[str, int] = {}
    for path, _relative in walk_files(query.target, signal=signal, skip_hidden=True):
        if not selected_by(path, base):
            continue
        try:
            if os.path.getsize(path) > _MAX_SEARCH_FILE:
                continue
            with open(open_regular(path, checked=False), "rb") as file:  # a FIFO in the tree is skipped
                data = file.read()
        except (OSError, NotRegularFileError):
            continue
        if b"\0" in data[:_BINARY_PROBE]:
            continue
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if regex.search(text) is None:
            continue
        shown = _shown_path(path, query.cwd)
        file_lines = text.splitlines()
        matched = [i for i, line in enumerate(file_lines) if regex.search(line)]
        counts[shown] = len(matched)
        selected: list[tuple[int, bool, str]] = []
        if query.mode == "content":
            wanted: dict[int, bool] = {}
            for i in matched:
                for j in range(max(0, i - query.before), min(len(file_lines), i + query.after + 1)):
                    wanted[j] = wanted.get(j, False) or j == i
            selected = [(j + 1, is_match, file_lines[j]) for j, is_match in sorted(wanted.items())]
        groups.append((shown, selected))
        if signal is not None and signal.aborted:
            break
    if signal is not None and signal.aborted:
        return GrepOutcome([], error="cancelled")
    return _render(groups, query, counts, False)
