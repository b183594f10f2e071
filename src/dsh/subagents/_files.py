"""User-defined agent types from Markdown files: ``.dsh/agents/<name>.md`` in the project and ``agents/<name>.md``
in the user's config directory.

Guarantees (the same as Markdown commands'):

* Project files are searched from the session's directory up to its repository root (the nearest ancestor with a
  ``.git``; without one, the session's directory alone); a nearer file shadows a farther one, a project file
  shadows a user file, and a file shadows a built-in type of the same name.
* A file is read only when it is a regular file whose real path stays inside the repository (project files) or
  the user's config directory, at most :data:`MAX_FILE_BYTES` of it (:func:`dsh.ownfiles.read_inside`); its front
  matter goes through :func:`dsh.ownfiles.split_front_matter` (no aliases, bounded). Front matter: ``description``
  (text), ``tools`` (a list of tool names, or one comma-separated text; absent: the parent's tools), ``model``
  (``provider:model``); the body is the child's instructions (after the general sub-agent guidance). A file that is refused or malformed is skipped with
  one log line and never breaks the session or the other types.
"""

from __future__ import annotations

import re
from pathlib import Path

from dsh._log import get_logger
from dsh.ownfiles import markdown_files, project_dirs
from dsh.subagents._types import BUILTIN_TYPES, REPORT_GUIDANCE, AgentType

__all__ = ["MAX_FILE_BYTES", "agent_types", "parse_agent_file"]

log = get_logger("dsh.subagents")
_FILE_NAME = re.compile(r"([A-Za-z0-9_.-]{1,64})\.md")
MAX_FILE_BYTES = 256 * 1024
_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,128}")


def _user_dir() -> Path:
    from dsh.ownfiles import user_config_dir

    return user_config_dir() / "agents"


def parse_agent_file(name: str, text: str) -> AgentType:
    """The type a file defines; raises ``ValueError`` (naming the field) when its front matter cannot be used."""
    from dsh.ownfiles import split_front_matter

    front, body = split_front_matter(text)
    description = front.get("description")
    if not isinstance(description, str) or not description.strip():
        raise ValueError("front matter 'description' must be a non-empty text")
    raw_tools = front.get("tools")
    tools: frozenset[str] | None = None
    if isinstance(raw_tools, str):
        tools = frozenset(part.strip() for part in raw_tools.split(",") if part.strip())
    elif isinstance(raw_tools, list) and all(isinstance(t, str) and _NAME.fullmatch(t) for t in raw_tools):
        tools = frozenset(raw_tools)
    elif raw_tools is not None:
        raise ValueError("front matter 'tools' must be a list of tool names or a comma-separated text")
    model = front.get("model")
    if model is not None and not isinstance(model, str):
        raise ValueError("front matter 'model' must be a text (provider:model)")
    instructions = f"{REPORT_GUIDANCE}\n\n{body.strip()}".strip()
    return AgentType(name, " ".join(description.split()), instructions, tools=tools, model=model or None)


def _load(name: str, path: Path, root: Path) -> AgentType | None:
    from dsh.ownfiles import read_inside

    try:
        read = read_inside(path, [root], MAX_FILE_BYTES + 1)
        if len(read.data) > MAX_FILE_BYTES:
            raise ValueError(f"larger than {MAX_FILE_BYTES} bytes")
        return parse_agent_file(name, read.data.decode("utf-8"))
    except Exception as exc:  # whatever a file does: skip it, never fail the call
        log.warning("skipped an agent file", path=str(path), reason=f"{type(exc).__name__}: {str(exc)[:200]}")
        return None


def agent_types(cwd: str | None) -> dict[str, AgentType]:
    """The agent types a session in *cwd* offers: built-ins, shadowed by user files, shadowed by project files
    (nearest first). The order is stable: built-ins first, then the files' names in order."""
    found: dict[str, AgentType] = {}
    sources: list[tuple[Path, Path]] = []
    if cwd is not None:
        dirs = project_dirs(cwd)
        sources += [(directory / ".dsh" / "agents", dirs[-1]) for directory in dirs]
    user = _user_dir()
    sources.append((user, user.parent))
    for directory, root in sources:
        for name, path in markdown_files(directory, _FILE_NAME):
            if name in found:
                continue
            loaded = _load(name, path, root)
            if loaded is not None:
                found[name] = loaded
    types = {name: found.pop(name, kind) for name, kind in BUILTIN_TYPES.items()}
    types.update(found)
    return types
