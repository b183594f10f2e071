"""Omission placeholders: the lines a model writes instead of code it did not want to repeat.

``# ... rest of the file unchanged``, ``// ... existing code ...``, ``/* unchanged */``: written into a file,
such a line silently deletes everything it stands for. :func:`find_placeholder` finds the first one in a new
text that the old text did not already contain.

Guarantees: only a line that is nothing but a comment, or nothing but a parenthesised or bracketed note
(``(rest of methods ...)``, ``[... rest unchanged ...]``, any case, ``...`` or ``…``), counts (a bare ``...``,
``(...)`` or ``[...]`` is Python's Ellipsis, real code); its words must say that code was left out (an ellipsis with "rest", "existing", "unchanged", "same",
"omitted", "previous", "remaining"…, or one of the short phrases such as "unchanged" and "existing code"
alone); a line that already was in the old text is the file's own comment, never refused.
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["Placeholder", "find_placeholder"]

_COMMENT = re.compile(
    r"^\s*(?://+|#+|/\*+|<!--|--|;+|\*+|\{/\*|'|rem\s)\s*(?P<body>.*?)\s*(?:\*+/|-->|\*/\})?\s*$", re.I
)
_BRACKETED = re.compile(r"^\s*(?:\((?P<paren>.*)\)|\[(?P<square>.*)\])\s*[;,]?\s*$")
_ELLIPSIS = re.compile(r"\.\.\.|\u2026")
_WORDS = re.compile(
    r"\b(rest|existing|unchanged|same|omitted|omit|previous|remaining|remainder|other|more|elided|skipped|"
    r"truncated|as before|here)\b",
    re.I,
)
_BRACKET_WORDS = re.compile(
    r"\b(rest|existing|unchanged|same|omitted|omit|previous|remaining|remainder|other|elided|skipped|truncated|"
    r"as before)\b",
    re.I,
)
"""A bracketed note needs a stronger word than a comment: ``[Read more...]`` is a Markdown line, not a gap."""
_PHRASES = re.compile(
    r"^(?:(?:the\s+)?(?:rest|remainder)\s+of\s+(?:the\s+)?[\w\s]{0,30}?"
    r"|(?:[\w\s]{0,20}\s)?(?:unchanged|omitted(?:\s+for\s+brevity)?)"
    r"|existing\s+[\w\s]{0,20}|(?:everything|all)\s+else[\w\s]{0,20}|same\s+as\s+before"
    r"|(?:keep|keeps)\s+(?:the\s+)?(?:rest|existing)[\w\s]{0,20})$",
    re.I,
)


class Placeholder(NamedTuple):
    """An omission placeholder: its 1-based line in the new text and the line, stripped."""

    line: int
    text: str


def _is_placeholder(line: str) -> bool:
    match = _COMMENT.match(line)
    if match is not None:
        body = match.group("body")
    else:
        bracketed = _BRACKETED.match(line)
        if bracketed is None:
            return False
        body = (bracketed.group("paren") if bracketed.group("paren") is not None else bracketed.group("square")).strip()
    if not body or len(body) > 80:
        return False
    if _ELLIPSIS.search(body):
        core = _ELLIPSIS.sub(" ", body)
        # a comment of dots alone says "left out"; brackets of dots alone are Python's Ellipsis
        if match is None:
            return bool(_BRACKET_WORDS.search(core))
        return bool(_WORDS.search(core)) or not core.strip(" .:")
    return bool(_PHRASES.match(body.strip(" .:")))


def find_placeholder(new: str, old: str | None, *, known: str = "") -> Placeholder | None:
    """The first omission placeholder line of *new* that neither *old* nor *known* (the whole file, for an edit)
    contains, or None. With no old text (a new file) or an old text without a non-blank line
    there is nothing to omit: always None."""
    if not old or not old.strip():
        return None
    seen = {line.strip() for line in old.splitlines()} | {line.strip() for line in known.splitlines()}
    for number, line in enumerate(new.splitlines(), 1):
        stripped = line.strip()
        if stripped and stripped not in seen and _is_placeholder(line):
            return Placeholder(number, stripped)
    return None
