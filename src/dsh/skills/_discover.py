"""Finding skills: folders with a ``SKILL.md`` (the Agent Skills format) in the project and the user's config
directory.

Guarantees:

* Sources, first found wins (a later skill of the same name is shadowed): for each directory from the session's
  directory up to its repository root (nearest first, :func:`dsh.ownfiles.project_dirs`), ``.dsh/skills/``, then
  ``.agents/skills/``, then ``.claude/skills/`` when the configuration opts in; then the user's
  ``skills/`` in dsh's config directory. A project skill therefore shadows a user skill of the same name.
* A skill is a folder ``<source>/<name>/`` holding ``SKILL.md``. That file is read only through
  :func:`dsh.ownfiles.read_inside` (a regular file whose real path stays inside the repository, or the user's
  config directory; at most :data:`MAX_SKILL_BYTES`), and its front matter only through
  :func:`dsh.ownfiles.split_front_matter` (no aliases or anchors, bounded depth and size).
* The front matter must give ``name`` (1-64 of lowercase letters, digits and single hyphens, equal to the folder's
  name) and ``description`` (text, at most :data:`MAX_DESCRIPTION` characters; whitespace is folded so it is one
  line); ``allowed-tools`` is optional (a list, or a string separated by spaces or commas). A skill that breaks any
  rule is skipped with one line naming its file and the reason (a log line, or the caller's report: the skills
  plugin makes it a session notice); it never breaks the session or other skills.
* At most :data:`MAX_SKILLS` skills are offered; the rest are skipped with one log line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh._log import get_logger

__all__ = ["MAX_DESCRIPTION", "MAX_SKILLS", "MAX_SKILL_BYTES", "Skill", "discover_skills", "load_skill"]

log = get_logger("dsh.skills")
NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
MAX_NAME = 64
MAX_DESCRIPTION = 1024
"""The Agent Skills specification's bound on a description."""
MAX_SKILL_BYTES = 256 * 1024
"""A ``SKILL.md`` larger than this is refused (the specification recommends under 500 lines)."""
MAX_SKILLS = 100
"""Skills listed for one session: the prompt section stays small whatever a repository holds."""
PROJECT_SOURCES = (".dsh/skills", ".agents/skills")
CLAUDE_SOURCE = ".claude/skills"


@dataclass(frozen=True, slots=True)
class Skill:
    """One skill as discovered: ``origin`` is ``project`` or ``user``, ``source`` the folder it was found in
    (``.agents/skills``, ``~/.config/dsh/skills``...), ``root`` the directory its files must stay inside."""

    name: str
    description: str
    path: Path
    """Its ``SKILL.md``."""
    origin: str
    source: str
    root: Path
    allowed_tools: tuple[str, ...] | None = None
    """The tools the skill lets the model call while it follows it (None: no restriction)."""

    @property
    def directory(self) -> Path:
        return self.path.parent


def _allowed_tools(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        items = [item for item in re.split(r"[\s,]+(?![^()]*\))", value) if item]
    elif isinstance(value, list) and all(isinstance(item, str) for item in value):
        items = [item.strip() for item in value if item.strip()]
    else:
        raise ValueError("allowed-tools must be a list of tool names or a string")
    return tuple(items)


def load_skill(path: Path, root: Path, folder: str, origin: str, source: str) -> tuple[Skill, str]:
    """``(skill, body)`` of the ``SKILL.md`` at *path* (see the module docstring for the rules); raises on any
    broken rule (``FileRefused``, ``FrontMatterError``, ``ValueError``, ``UnicodeDecodeError``)."""
    from dsh.ownfiles import read_inside, split_front_matter

    read = read_inside(path, [root], MAX_SKILL_BYTES + 1)
    if len(read.data) > MAX_SKILL_BYTES:
        raise ValueError(f"larger than {MAX_SKILL_BYTES} bytes")
    front, body = split_front_matter(read.data.decode("utf-8"))
    name, description = front.get("name"), front.get("description")
    if not isinstance(name, str) or len(name) > MAX_NAME or not NAME.fullmatch(name):
        raise ValueError("name must be 1-64 lowercase letters, digits and single hyphens")
    if name != folder:
        raise ValueError(f"name {name!r} differs from its folder's name {folder[:64]!r}")
    if not isinstance(description, str) or not description.strip():
        raise ValueError("description must be non-empty text")
    description = " ".join(description.split())
    if len(description) > MAX_DESCRIPTION:
        raise ValueError(f"description is longer than {MAX_DESCRIPTION} characters")
    allowed = _allowed_tools(front.get("allowed-tools"))
    return Skill(name, description, path, origin, source, root, allowed), body


def _user_dir() -> Path:
    from dsh.ownfiles import user_config_dir

    return user_config_dir() / "skills"


def _sources(cwd: str | None, claude: bool) -> list[tuple[Path, str, Path, str]]:
    """``(folder, origin, root, label)`` in precedence order."""
    from dsh.ownfiles import project_dirs

    out: list[tuple[Path, str, Path, str]] = []
    if cwd is not None:
        dirs = project_dirs(cwd)
        names = (*PROJECT_SOURCES, CLAUDE_SOURCE) if claude else PROJECT_SOURCES
        out.extend((directory / name, "project", dirs[-1], name) for directory in dirs for name in names)
    user = _user_dir()
    out.append((user, "user", user.parent, str(user)))
    return out


def _log_skip(path: Path, reason: str) -> None:
    log.warning("skipped a skill", path=str(path), reason=reason)


def discover_skills(
    cwd: str | None, *, claude: bool = False, skipped: Callable[[Path, str], None] | None = None
) -> list[Skill]:
    """The skills a session in *cwd* offers, each name once, in precedence then name order (see the module
    docstring). Each skipped file is reported once: to *skipped* ``(path, reason)`` when given (which then owns the
    one line), else as one log line."""
    report = skipped or _log_skip
    found: dict[str, Skill] = {}
    for folder, origin, root, label in _sources(cwd, claude):
        try:
            entries = sorted(folder.iterdir())
        except OSError:
            continue
        for entry in entries:
            if entry.name in found or not entry.is_dir():
                continue
            path = entry / "SKILL.md"
            if not path.exists() and not path.is_symlink():
                continue
            if len(found) >= MAX_SKILLS:
                report(path, f"more than {MAX_SKILLS} skills")
                continue
            try:
                skill, _ = load_skill(path, root, entry.name, origin, label)
            except Exception as exc:  # whatever a file does: skip it with one line, never fail
                report(path, f"{type(exc).__name__}: {str(exc)[:200]}")
                continue
            found[skill.name] = skill
    return list(found.values())
