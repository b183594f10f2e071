"""Front matter (a leading ``---`` YAML block of a Markdown file) parsed so that no file can hurt the daemon.

PyYAML's ``safe_load`` is safe against code execution, not against resources: a 467-byte alias bomb expands to
a structure that froze a daemon for 104 s and then crashed it when it was turned into text, and a block nested
5,000 deep raised ``RecursionError`` (which no ``except ValueError`` catches) inside ``session/new``.

Guarantees of :func:`load_front_matter`:

* The text is at most :data:`MAX_FRONT_MATTER_BYTES` (UTF-8) long; it is checked before any parsing.
* It is first walked as a stream of parser *events* (PyYAML's parser is a state machine, not recursive): an alias
  or an anchor, or collections nested deeper than :data:`MAX_DEPTH`, refuse the block before a single node is
  built. Only then is it constructed with the safe loader, whose recursion the depth bound keeps small.
* The result is a mapping (an empty block is ``{}``); every failure is a :class:`FrontMatterError` with a reason
  short enough for one log line.
"""

from __future__ import annotations

from typing import Any

__all__ = ["MAX_DEPTH", "MAX_FRONT_MATTER_BYTES", "FrontMatterError", "load_front_matter", "split_front_matter"]

MAX_FRONT_MATTER_BYTES = 8 * 1024
"""Front matter holds a description, an argument hint, a model name, a list of tools: a few hundred bytes."""
MAX_DEPTH = 8
"""Nesting of mappings and sequences: ``tools: [a, b]`` is depth 2."""


class FrontMatterError(ValueError):
    """The front matter cannot be used (what is wrong, in one short sentence)."""


def load_front_matter(text: str) -> dict[str, Any]:
    """The mapping in the YAML *text* (see the module docstring for what is refused)."""
    import yaml

    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_FRONT_MATTER_BYTES:
        raise FrontMatterError(f"front matter is {size} bytes, more than {MAX_FRONT_MATTER_BYTES}")
    depth = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                raise FrontMatterError("front matter may not use YAML aliases (*name)")
            if getattr(event, "anchor", None) is not None:
                raise FrontMatterError("front matter may not use YAML anchors (&name)")
            if isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
                depth += 1
                if depth > MAX_DEPTH:
                    raise FrontMatterError(f"front matter is nested deeper than {MAX_DEPTH} levels")
            elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
                depth -= 1
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise FrontMatterError(f"front matter: {str(exc)[:300]}") from None
    except RecursionError:  # not reachable within the bounds above; kept so no parse can escape as a crash
        raise FrontMatterError("front matter is nested too deeply") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise FrontMatterError("front matter must be a mapping")
    return raw


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """``(front matter, body)`` of a Markdown file's *text*; no leading ``---`` line means no front matter.
    Raises :class:`FrontMatterError` when the block is not closed or cannot be used."""
    if not text.startswith("---"):
        return {}, text
    lines = text.splitlines(keepends=True)
    if lines[0].strip() != "---":
        return {}, text
    size = 0
    for index in range(1, len(lines)):
        if lines[index].strip() == "---":
            return load_front_matter("".join(lines[1:index])), "".join(lines[index + 1 :])
        size += len(lines[index])
        if size > MAX_FRONT_MATTER_BYTES:
            raise FrontMatterError(f"front matter is longer than {MAX_FRONT_MATTER_BYTES} bytes")
    raise FrontMatterError("front matter is not closed by a '---' line")
