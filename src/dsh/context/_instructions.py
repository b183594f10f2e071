"""Project instructions: ``AGENTS.md`` files (or ``CLAUDE.md`` where no ``AGENTS.md`` stands beside it) from the
repository root down to the working directory, after the user's own ``AGENTS.md`` in the dsh config directory.

Guarantees: read once per session (start, resume, load); the most general file comes first and the most
specific last (the model reads later text as overriding); the whole text is capped at ``cap`` characters and a
cut is visible to the model (a note says which file was cut and by how much); unreadable files are skipped.

Each file is read through :func:`dsh.ownfiles.read_inside`: only a regular file whose real path stays inside
its root (the repository, or the session's directory outside a repository; the dsh config directory for the
user's own) is read, and at most what the cap can still use (4 bytes a character), so a 1 GiB file costs the
cap's worth of memory. Anything else (a symlink to ``/proc/self/environ`` or out of the project, a FIFO) is
skipped with one log line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from dsh._log import get_logger
from dsh.ownfiles import user_config_dir

__all__ = ["DEFAULT_CAP", "Instructions", "find_instruction_files", "load_instructions"]

DEFAULT_CAP = 32_000
"""Characters of project instructions at most (about 8,000 tokens)."""
NAMES = ("AGENTS.md", "CLAUDE.md")
log = get_logger("dsh.context")


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
        if candidate.exists() or candidate.is_symlink():  # read_inside decides (and says) whether it is usable
            return candidate
    return None


def find_instruction_files(cwd: str, repo_root: str | None, config_dir: Path | None = None) -> list[tuple[Path, Path]]:
    """``(file, root)`` of the files to use, most general first: the user's, then the repository root's … down
    to *cwd*'s; *root* is where the file's real path must stay (the config directory, or the repository root,
    or *cwd* outside a repository)."""
    files: list[tuple[Path, Path]] = []
    config = config_dir if config_dir is not None else user_config_dir()
    user = _pick(config)
    if user is not None and user.name == "AGENTS.md":
        files.append((user, config))
    start = Path(cwd)
    chain = [start]
    project_root = start
    if repo_root is not None:
        root = Path(repo_root)
        for parent in start.parents:
            if not (parent == root or root in parent.parents):
                break
            chain.append(parent)
        project_root = root
    for directory in reversed(chain):
        found = _pick(directory)
        if found is not None and all(found != path for path, _ in files):
            files.append((found, project_root))
    return files


def _read(path: Path, root: Path, chars: int) -> tuple[str, int | None] | None:
    """``(text, characters in the whole file or None when it was not read whole)``, reading at most what
    *chars* characters can take; None (and one log line) for a file that is refused or unreadable."""
    from dsh.ownfiles import FileRefused, read_inside

    try:
        read = read_inside(path, [root], max(chars, 1) * 4 + 4)
    except FileRefused as exc:
        log.warning("skipped an instructions file", path=str(path), reason=str(exc)[:300])
        return None
    text = read.data.decode("utf-8", errors="replace")
    if read.complete:
        return text.strip(), None
    return text.lstrip(), read.size


def load_instructions(files: list[tuple[Path, Path]], cap: int = DEFAULT_CAP) -> Instructions:
    """Read *files* (``(file, root)``, see :func:`find_instruction_files`) into the project-instructions
    section, at most *cap* characters of file text."""
    parts: list[str] = []
    used: list[str] = []
    cut: list[str] = []
    left = cap
    for path, root in files:
        got = _read(path, root, left)
        if got is None:
            continue
        text, partial_size = got
        if not text:
            continue
        used.append(str(path))
        whole = f"{len(text)} characters" if partial_size is None else f"{partial_size} bytes"
        if left <= 0:
            cut.append(str(path))
            parts.append(f"## {path}\n[left out: {whole}; project instructions are capped at {cap}]")
            continue
        if len(text) > left or partial_size is not None:
            cut.append(str(path))
            amount = (
                f"{len(text) - left} of {len(text)} characters" if partial_size is None else f"the rest of its {whole}"
            )
            text = (
                text[:left] + f"\n[truncated: {amount} of this file left out; project instructions are capped at {cap} "
                "characters. Read the file itself if you need the rest.]"
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
