"""User commands from Markdown files: ``.dsh/commands/<name>.md`` in the project and ``commands/<name>.md`` in the
user's config directory.

Guarantees:

* Project files are searched from the session's directory up to its repository root (the nearest ancestor with a
  ``.git``; without one, the session's directory alone); a nearer file shadows a farther one, and any project file
  shadows a user file of the same name.
* A file that cannot be read or whose front matter does not parse is skipped with one log line; it never breaks
  the session or the other commands.
* Expansion is textual: ``$ARGUMENTS`` is the whole argument string, ``$1`` … ``$9`` its whitespace-separated
  words (empty when absent). The expanded text becomes the user's prompt.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from dsh._log import get_logger

if TYPE_CHECKING:
    from dsh.commands._registry import Command, CommandResult, Invocation

__all__ = ["expand", "markdown_commands", "parse_command_file", "project_dirs"]

log = get_logger("dsh.commands")
_FILE_NAME = re.compile(r"([A-Za-z0-9_.:-]{1,64})\.md")
_POSITIONAL = re.compile(r"\$([1-9])")
MAX_FILE_BYTES = 256 * 1024


def project_dirs(cwd: str) -> list[Path]:
    """The directories searched for ``.dsh/commands``: *cwd* and its ancestors up to the repository root, nearest
    first (only *cwd* when it is not inside a repository)."""
    start = Path(cwd)
    chain = [start, *start.parents]
    for index, directory in enumerate(chain):
        if (directory / ".git").exists():
            return chain[: index + 1]
    return [start]


def _user_dir() -> Path:
    from dsh.config import default_config_path

    return default_config_path().parent / "commands"


def _files(directory: Path) -> Iterator[tuple[str, Path]]:
    try:
        entries = sorted(directory.iterdir())
    except OSError:
        return
    for path in entries:
        match = _FILE_NAME.fullmatch(path.name)
        if match is not None and path.is_file():
            yield match.group(1), path


def parse_command_file(text: str) -> tuple[dict[str, str], str]:
    """``(front matter, body)``; the front matter is an optional leading ``---`` YAML block of string values.
    Raises ``ValueError`` when it does not parse."""
    if not text.startswith("---"):
        return {}, text
    lines = text.splitlines(keepends=True)
    for index in range(1, len(lines)):
        if lines[index].strip() == "---":
            import yaml

            try:
                raw = yaml.safe_load("".join(lines[1:index])) or {}
            except yaml.YAMLError as exc:
                raise ValueError(f"front matter: {exc}") from None
            if not isinstance(raw, dict):
                raise ValueError("front matter must be a mapping")
            return {str(k): str(v) for k, v in raw.items() if v is not None}, "".join(lines[index + 1 :])
    raise ValueError("front matter is not closed by a '---' line")


def expand(body: str, args: str) -> str:
    """The prompt text of a Markdown command run with *args*."""
    words = args.split()
    text = body.replace("$ARGUMENTS", args)
    return _POSITIONAL.sub(lambda m: words[int(m.group(1)) - 1] if int(m.group(1)) <= len(words) else "", text)


def _load(name: str, path: Path, origin: str) -> Command | None:
    from dsh.commands._registry import Command

    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise ValueError(f"larger than {MAX_FILE_BYTES} bytes")
        front, body = parse_command_file(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        log.warning("skipped a command file", path=str(path), reason=str(exc)[:200])
        return None
    description = front.get("description") or f"{origin} command ({path.name})"
    hint = front.get("argument-hint")

    async def run(invocation: Invocation) -> CommandResult:
        from dsh.commands._registry import CommandResult

        return CommandResult(prompt=[{"type": "text", "text": expand(body, invocation.args)}])

    return Command(name, description, run, hint, origin=origin, meta={"path": str(path)})


def markdown_commands(cwd: str | None) -> list[Command]:
    """The Markdown commands a session in *cwd* offers (project first, then user), each name once."""
    found: dict[str, Command] = {}
    sources: list[tuple[Path, str]] = []
    if cwd is not None:
        sources += [(directory / ".dsh" / "commands", "project") for directory in project_dirs(cwd)]
    sources.append((_user_dir(), "user"))
    for directory, origin in sources:
        for name, path in _files(directory):
            if name in found:
                continue
            command = _load(name, path, origin)
            if command is not None:
                found[name] = command
    return list(found.values())
