"""Where hooks come from: the user's configuration file, the project's ``.dsh/settings.yaml`` and, opted in, its
``.claude/settings.json``; and which of a project's hooks the user approved.

Guarantees:

* A project file is read through :func:`dsh.ownfiles.read_inside` (a regular file inside the project, at most
  :data:`MAX_SETTINGS_BYTES`; a symlink out, a FIFO or a device is refused before reading); the YAML through the
  bounded loader (no aliases, depth 8, 8 KiB), the JSON with its depth bounded. A file that cannot be used is
  skipped with one reason (``skipped``) and hides nothing else.
* :func:`project_digest` is the sha256 of the project hooks' canonical JSON (event, matcher, command, timeout,
  file): any change to any of them is a new digest, so an approval covers exactly what the user was shown.
* :class:`TrustStore` keeps approvals per project root and digest in one JSON file written atomically; a missing
  or unreadable file is no approval (the user is asked).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from dsh.hooks._config import EVENTS, HookEvent, HooksConfig

__all__ = [
    "MAX_SETTINGS_BYTES",
    "Hook",
    "TrustStore",
    "claude_name",
    "from_config",
    "list_hooks",
    "matches",
    "project_digest",
    "project_hooks",
    "project_root",
]

MAX_SETTINGS_BYTES = 256 * 1024
_MAX_JSON_DEPTH = 32


@dataclass(frozen=True, slots=True)
class Hook:
    """One configured command for one event: where it came from (``source``: ``user``, ``project``, ``claude``;
    ``path``: the file)."""

    event: HookEvent
    matcher: str
    command: str
    timeout: float
    source: str
    path: str

    @property
    def from_project(self) -> bool:
        return self.source != "user"


def from_config(config: HooksConfig, source: str, path: str) -> list[Hook]:
    """The hooks of one ``hooks:`` section, in file order."""
    return [
        Hook(event, group.matcher, hook.command, hook.timeout, source, path)
        for event in EVENTS
        for group in config.groups(event)
        for hook in group.hooks
    ]


def project_root(cwd: str) -> str:
    """The project a session in *cwd* belongs to: its repository's root, else *cwd* (what approvals are kept by)."""
    from dsh.ownfiles import project_dirs

    return str(project_dirs(cwd)[-1])


def _depth(value: Any, limit: int) -> bool:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return False
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return True


def _read(path: Path, root: Path) -> str | None:
    from dsh.ownfiles import read_inside

    if not os.path.lexists(path):
        return None
    read = read_inside(path, [root], MAX_SETTINGS_BYTES + 1)
    if len(read.data) > MAX_SETTINGS_BYTES:
        raise ValueError(f"larger than {MAX_SETTINGS_BYTES} bytes")
    return read.data.decode("utf-8")


def _section(path: Path, root: Path, claude: bool) -> HooksConfig | None:
    """The ``hooks`` section of one project file, None when the file or the section is absent; raises
    ``ValueError`` (or ``OSError``) naming what is wrong."""
    text = _read(path, root)
    if text is None:
        return None
    if claude:
        try:
            data = json.loads(text)
        except RecursionError:
            raise ValueError("nested too deeply") from None
        if not _depth(data, _MAX_JSON_DEPTH):
            raise ValueError("nested too deeply")
    else:
        from dsh.ownfiles import load_front_matter

        data = load_front_matter(text)
    if not isinstance(data, dict):
        raise ValueError("not a mapping")
    hooks = data.get("hooks")
    if hooks is None:
        return None
    if not isinstance(hooks, dict):
        raise ValueError("`hooks` is not a mapping")
    if "import" in hooks or "enabled" in hooks:
        raise ValueError("`import` and `enabled` belong in the user's configuration file, not a project's")
    if claude:  # Claude Code's file holds its other hook events too: only the ones dsh runs are read
        hooks = {key: value for key, value in hooks.items() if key in EVENTS}
    try:
        return HooksConfig.model_validate(hooks)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"hooks.{where}: {first['msg']}") from None


def project_hooks(cwd: str, *, claude: bool, skipped: Callable[[Path, str], None] | None = None) -> list[Hook]:
    """The hooks of the project a session in *cwd* is in: ``.dsh/settings.yaml`` (then, with *claude*,
    ``.claude/settings.json``) of each directory from *cwd* up to the repository root, nearest first."""
    from dsh.ownfiles import project_dirs

    dirs = project_dirs(cwd)
    root = dirs[-1]
    out: list[Hook] = []
    for directory in dirs:
        files = [(directory / ".dsh" / "settings.yaml", "project", False)]
        if claude:
            files.append((directory / ".claude" / "settings.json", "claude", True))
        for path, source, is_json in files:
            try:
                section = _section(path, root, is_json)
            except (ValueError, OSError) as exc:
                if skipped is not None:
                    skipped(path, str(exc) or type(exc).__name__)
                continue
            if section is not None:
                out += from_config(section, source, str(path))
    return out


def project_digest(hooks: list[Hook]) -> str:
    """sha256 of the canonical JSON of *hooks* (see the module docstring)."""
    canonical = [[h.event, h.matcher, h.command, h.timeout, h.path] for h in hooks if h.from_project]
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_CLAUDE_NAMES: dict[str, str] | None = None


def claude_name(tool: str) -> str:
    """Claude Code's name of the dsh tool *tool* (``run_command`` → ``Bash``), else *tool* itself: the same table
    as skills' ``allowed-tools`` (:data:`dsh.skills.CLAUDE_TOOLS`), read backwards."""
    global _CLAUDE_NAMES
    if _CLAUDE_NAMES is None:
        from dsh.skills import CLAUDE_TOOLS

        names: dict[str, str] = {}
        for claude, ours in CLAUDE_TOOLS.items():
            for name in ours:
                names.setdefault(name, claude)
        _CLAUDE_NAMES = names
    return _CLAUDE_NAMES.get(tool, tool)


def matches(matcher: str, *values: str) -> bool:
    """A matcher applies: empty or ``*`` always; else a regular expression matching one of *values* whole (a
    matcher that is not a valid expression matches a value equal to it)."""
    if matcher in ("", "*"):
        return True
    try:
        pattern = re.compile(matcher)
    except re.error:
        return matcher in values
    return any(pattern.fullmatch(value) is not None for value in values)


class TrustStore:
    """Which project hooks the user approved: ``{root: [digest, ...]}`` in *path* (None: this process only)."""

    def __init__(self, path: str | None) -> None:
        self._path = path
        self._memory: dict[str, set[str]] = {}

    def _load(self) -> dict[str, list[str]]:
        if self._path is None:
            return {}
        try:
            with open(self._path, encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def trusted(self, root: str, digest: str) -> bool:
        if digest in self._memory.get(root, set()):
            return True
        approved = self._load().get(root)
        return isinstance(approved, list) and digest in approved

    def remember(self, root: str, digest: str, *, durable: bool) -> None:
        self._memory.setdefault(root, set()).add(digest)
        if not durable or self._path is None:
            return
        data = self._load()
        approved = [d for d in data.get(root, []) if isinstance(d, str)][-15:]  # a project's last few versions
        if digest not in approved:
            approved.append(digest)
        data[root] = approved
        directory = os.path.dirname(self._path)
        os.makedirs(directory, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=directory, prefix=".hooks-trust-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(data, handle, indent=1, sort_keys=True)
            os.replace(temporary, self._path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise


def list_hooks(config: HooksConfig, source: str, cwd: str) -> list[str]:
    """``dsh config show --hooks``: one tab-separated line per hook a session in *cwd* has (event, matcher,
    command, timeout, origin, file), the user's first (origin ``user``; a project's: ``project`` or ``claude``, run
    only once approved in a session)."""
    if not config.enabled:
        return []
    found = [*from_config(config, "user", source), *project_hooks(cwd, claude="claude" in config.imports)]
    return [f"{h.event}\t{h.matcher or '*'}\t{h.command}\t{h.timeout:g}s\t{h.source}\t{h.path}" for h in found]
