"""User commands from Markdown files: ``.dsh/commands/<name>.md`` in the project and ``commands/<name>.md`` in the
user's config directory.

Guarantees:

* Project files are searched from the session's directory up to its repository root (the nearest ancestor with a
  ``.git``; without one, the session's directory alone); a nearer file shadows a farther one, and any project file
  shadows a user file of the same name.
* A file is read only when it is a regular file whose real path stays inside the repository (project files) or
  the user's config directory (the user's own), at most :data:`MAX_FILE_BYTES` of it
  (:func:`dsh.ownfiles.read_inside`); its front matter goes through :func:`dsh.ownfiles.split_front_matter` (no
  aliases, bounded depth and size). A file that is refused, cannot be read or whose front matter cannot be used
  is skipped with one log line; whatever is wrong with it, it never breaks the session or the other commands.
* Expansion is textual and happens once, over the template only: ``$ARGUMENTS`` is the whole argument string,
  ``$1`` … ``$9`` its whitespace-separated words (empty when absent); a ``$1`` typed inside the arguments stays
  as typed. The expanded text becomes the user's prompt; one longer than :data:`MAX_EXPANDED_CHARS` is refused
  (:class:`ExpansionTooLarge`) before it is built.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from dsh._log import get_logger
from dsh.ownfiles import markdown_files, project_dirs

if TYPE_CHECKING:
    from dsh.commands._registry import Command, CommandResult, Invocation

__all__ = [
    "MAX_EXPANDED_CHARS",
    "ExpansionTooLarge",
    "expand",
    "markdown_commands",
    "parse_command_file",
    "project_dirs",
]

log = get_logger("dsh.commands")
_FILE_NAME = re.compile(r"([A-Za-z0-9_.:-]{1,64})\.md")
_PLACEHOLDER = re.compile(r"\$ARGUMENTS|\$([1-9])")
MAX_FILE_BYTES = 256 * 1024
MAX_EXPANDED_CHARS = 4 * 1024 * 1024
"""The longest prompt a Markdown command may expand to (4 Mi characters, far under the 128 MiB frame limit that
bounds what a client can send at all): a template repeating ``$ARGUMENTS`` cannot multiply a pasted text into
something no model accepts and every load must read again."""


class ExpansionTooLarge(ValueError):
    """The expanded prompt would be longer than :data:`MAX_EXPANDED_CHARS`."""


def _user_dir() -> Path:
    from dsh.ownfiles import user_config_dir

    return user_config_dir() / "commands"


def parse_command_file(text: str) -> tuple[dict[str, str], str]:
    """``(front matter, body)``; the front matter is an optional leading ``---`` YAML block whose values are
    turned into strings (nested values are refused). Raises ``ValueError`` when it cannot be used."""
    from dsh.ownfiles import FrontMatterError, split_front_matter

    raw, body = split_front_matter(text)
    front: dict[str, str] = {}
    for key, value in raw.items():
        if value is None:
            continue
        if isinstance(value, dict | list):
            raise FrontMatterError(f"front matter value {str(key)[:40]!r} must be text")
        front[str(key)] = str(value)
    return front, body


def expand(body: str, args: str) -> str:
    """The prompt text of a Markdown command run with *args*: one pass over *body*, never over what was
    substituted. Raises :class:`ExpansionTooLarge` (before building it) when the result would be longer than
    :data:`MAX_EXPANDED_CHARS`."""
    words = args.split()

    def value(match: re.Match[str]) -> str:
        if match.group(1) is None:
            return args
        index = int(match.group(1)) - 1
        return words[index] if index < len(words) else ""

    pieces: list[str] = []
    size = 0
    position = 0
    for match in _PLACEHOLDER.finditer(body):
        for piece in (body[position : match.start()], value(match)):
            size += len(piece)
            pieces.append(piece)
        position = match.end()
        if size > MAX_EXPANDED_CHARS:
            break
    pieces.append(body[position:])
    size += len(body) - position
    if size > MAX_EXPANDED_CHARS:
        raise ExpansionTooLarge(
            f"the expanded prompt would be more than {MAX_EXPANDED_CHARS:,} characters (the limit for a command's "
            f"prompt; {len(args):,} characters of arguments were given); shorten the arguments"
        )
    return "".join(pieces)


def _load(name: str, path: Path, origin: str, root: Path) -> Command | None:
    from dsh.commands._registry import Command
    from dsh.ownfiles import read_inside

    try:
        read = read_inside(path, [root], MAX_FILE_BYTES + 1)
        if len(read.data) > MAX_FILE_BYTES:
            raise ValueError(f"larger than {MAX_FILE_BYTES} bytes")
        front, body = parse_command_file(read.data.decode("utf-8"))
    except Exception as exc:  # whatever a file does (RecursionError, MemoryError's cousins): skip it, never fail
        log.warning("skipped a command file", path=str(path), reason=f"{type(exc).__name__}: {str(exc)[:200]}")
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
    sources: list[tuple[Path, str, Path]] = []
    if cwd is not None:
        dirs = project_dirs(cwd)
        sources += [(directory / ".dsh" / "commands", "project", dirs[-1]) for directory in dirs]
    user = _user_dir()
    sources.append((user, "user", user.parent))
    for directory, origin, root in sources:
        for name, path in markdown_files(directory, _FILE_NAME):
            if name in found:
                continue
            command = _load(name, path, origin, root)
            if command is not None:
                found[name] = command
    return list(found.values())
