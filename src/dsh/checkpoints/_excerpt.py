"""Large edits stored small: the part of a file change that changed, with a few lines of context around it.

A tool's result carries ``display.diff`` ``{path, old_text, new_text}`` for people (the session log keeps it, the
ACP front end turns it into the tool call's ``diff`` content). For a 10 MiB file that was the whole file twice, in
one log line and one editor frame. :func:`shrink_diff` replaces texts over :data:`LARGE` characters by the changed
region: the lines from the first difference to the last, with :data:`CONTEXT` unchanged lines each side, and says
so in ``excerpt`` ``{line, old_chars, new_chars}`` (``line``: the 1-based line of the file where the excerpt
starts). Nothing is lost that a rewind needs: the whole texts are in the checkpoint store, and ``/rewind`` works
from checkpoints, never from displays. Replays project the excerpt as they project any diff.

Guarantees: the prefix and suffix are found with C-speed slice comparisons (bisection), so a 10 MiB text costs
milliseconds; the excerpt of ``old`` with the unchanged lines around it put back is ``old`` exactly (and the same
for ``new``); a display whose texts are small, or that is not a diff, is returned unchanged.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CONTEXT", "LARGE", "excerpt", "shrink_diff"]

LARGE = 64 * 1024
"""Characters of old + new text above which a diff is stored as an excerpt."""
CONTEXT = 3
"""Unchanged lines kept before and after the changed region."""


def _prefix(a: str, b: str) -> int:
    """The length of the longest common prefix (bisection over slice comparisons)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _suffix(a: str, b: str, limit: int) -> int:
    """The length of the longest common suffix, at most *limit*."""
    low, high = 0, min(len(a), len(b), limit)
    while low < high:
        middle = (low + high + 1) // 2
        if a[len(a) - middle : len(a) - low] == b[len(b) - middle : len(b) - low]:
            low = middle
        else:
            high = middle - 1
    return low


def _back_lines(text: str, index: int, lines: int) -> int:
    """The start of the line *lines* lines before the one holding *index*."""
    start = text.rfind("\n", 0, index) + 1
    for _ in range(lines):
        if start == 0:
            break
        start = text.rfind("\n", 0, start - 1) + 1
    return start


def _forward_lines(text: str, index: int, lines: int) -> int:
    """The end (after its newline) of the line *lines* lines after the one holding *index*."""
    end = index
    if end > 0 and text[end - 1 : end] != "\n":
        found = text.find("\n", end)
        end = len(text) if found < 0 else found + 1
    for _ in range(lines):
        if end >= len(text):
            break
        found = text.find("\n", end)
        end = len(text) if found < 0 else found + 1
    return end


def excerpt(old: str, new: str, context: int = CONTEXT) -> tuple[str, str, int]:
    """``(old part, new part, 1-based first line)``: the changed region of *old* → *new* with *context* lines."""
    head = _prefix(old, new)
    tail = _suffix(old, new, min(len(old), len(new)) - head)
    start = _back_lines(old, head, context)  # the same offset in both: the text before *head* is shared
    old_end = _forward_lines(old, len(old) - tail, context)
    new_end = _forward_lines(new, len(new) - tail, context)
    return old[start:old_end], new[start:new_end], old.count("\n", 0, start) + 1


def shrink_diff(display: Any) -> Any:
    """*display* with a large ``diff`` replaced by its excerpt (see the module docstring); else *display* itself."""
    if not isinstance(display, dict):
        return display
    diff = display.get("diff")
    if not isinstance(diff, dict) or not isinstance(diff.get("new_text"), str):
        return display
    old = diff.get("old_text")
    old_text = old if isinstance(old, str) else ""
    new_text: str = diff["new_text"]
    if len(old_text) + len(new_text) <= LARGE:
        return display
    old_part, new_part, line = excerpt(old_text, new_text)
    shrunk = {
        **diff,
        "old_text": old_part if isinstance(old, str) else None,
        "new_text": new_part,
        "excerpt": {"line": line, "old_chars": len(old_text), "new_chars": len(new_text)},
    }
    return {**display, "diff": shrunk}
