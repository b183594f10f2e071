"""The edit matcher: where ``old_string`` is in a file's text, under progressively looser rules, and the new text.

A pure module (no I/O): :func:`plan_edits` takes the file's text and a list of :class:`Edit` and returns the new
text, or raises :class:`~dsh.tools.ToolError` naming the edit that failed. Nothing here writes; the caller writes the
result once, so an edit list with a failing member changes nothing.

Guarantees:

* Rules, in order, each tried only when every earlier one found nothing: ``exact`` (the string as given);
  ``trailing-whitespace`` (whole lines equal once trailing blanks are dropped); ``indentation`` (whole lines
  equal once leading and trailing blanks are dropped: ``new_string`` is re-indented by the indentation the
  file's block really has, tabs for spaces included); ``unicode-punctuation`` (typographic quotes, dashes and
  non-breaking spaces read as their ASCII forms, first within lines, then line by line with blanks dropped).
* A rule applies only when it finds exactly one place (or ``replace_all`` is set); a rule that finds several
  stops the search with ``AMBIGUOUS_MATCH``: a looser rule would only find more, and guessing which one is
  meant is how a wrong change gets written.
* Line endings: a file whose line breaks are all CRLF is matched as LF text and written back with CRLF, so the
  model (which saw lines) never has to type ``\\r``; a file with mixed endings is matched as it is. A final
  newline, a byte-order mark and any text outside the matched places are kept byte for byte.
* The outcome says which rule each edit used; the first changed line is given for the card.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dsh.tools._errors import ToolError

__all__ = ["RULES", "Edit", "EditPlan", "plan_edits"]

RULES = ("exact", "trailing-whitespace", "indentation", "unicode-punctuation")

_PUNCTUATION = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u2032": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u201f": '"',
        "\u2033": '"',
        "\u2010": "-",
        "\u2011": "-",
        "\u2012": "-",
        "\u2013": "-",
        "\u2014": "-",
        "\u2015": "-",
        "\u2212": "-",
        "\u00a0": " ",
        "\u2007": " ",
        "\u202f": " ",
        "\u2002": " ",
        "\u2003": " ",
        "\u2009": " ",
    }
)
"""One character for one character: positions in the normalised text are positions in the original."""

_INDENT = re.compile(r"[ \t]*")


@dataclass(frozen=True, slots=True)
class Edit:
    old_string: str
    new_string: str
    replace_all: bool = False


@dataclass(frozen=True, slots=True)
class EditPlan:
    """The file's new text; ``rules[i]`` is the rule edit *i* matched by, ``counts[i]`` how many places it
    changed; ``line`` is the 1-based line of the first edit's first change in the *old* text."""

    text: str
    rules: tuple[str, ...]
    counts: tuple[int, ...]
    line: int


def _error(message: str, code: str, index: int | None = None) -> ToolError:
    """An edit that cannot be applied: a :class:`ToolError` (what the model sees) whose message names the edit
    (``edits[i]: ...``) when it came in a list."""
    return ToolError(message, code)


# -- finding --------------------------------------------------------------------------------------------------


def _exact(text: str, old: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    start = text.find(old)
    while start != -1:
        spans.append((start, start + len(old)))
        start = text.find(old, start + len(old))
    return spans


def _line_starts(text: str) -> list[int]:
    starts = [0]
    index = text.find("\n")
    while index != -1:
        starts.append(index + 1)
        index = text.find("\n", index + 1)
    return starts


def _block_spans(text: str, old: str, key: Callable[[str], str]) -> list[tuple[int, int]]:
    """Places where whole lines of *text* equal *old*'s lines under *key* (non-overlapping, in order). The span
    runs from the first line's start to the last line's end, plus its newline when *old* ends with one."""
    old_lines = old.split("\n")
    with_newline = old_lines[-1] == "" and len(old_lines) > 1
    if with_newline:
        old_lines.pop()
    wanted = [key(line) for line in old_lines]
    if not any(wanted):
        return []  # only blank lines: every blank run would match
    starts = _line_starts(text)
    lines = text.split("\n")
    keys = [key(line) for line in lines]
    n = len(wanted)
    spans: list[tuple[int, int]] = []
    i = 0
    while i + n <= len(lines):
        if keys[i : i + n] == wanted:
            last = i + n - 1
            end = starts[last] + len(lines[last])
            if with_newline:
                if last + 1 >= len(lines):  # no newline after the last line: not the same block
                    i += 1
                    continue
                end += 1
            spans.append((starts[i], end))
            i += n
        else:
            i += 1
    return spans


def _rstrip(line: str) -> str:
    return line.rstrip()


def _strip(line: str) -> str:
    return line.strip()


def _punct_strip(line: str) -> str:
    return line.translate(_PUNCTUATION).replace("\u2026", "...").strip()


# -- re-indenting ---------------------------------------------------------------------------------------------


def _indent(line: str) -> str:
    match = _INDENT.match(line)
    return match.group(0) if match else ""


def _reindent(new: str, old: str, found: str) -> str:
    """*new* with its indentation moved from *old*'s to what the file's block *found* really has: each
    indentation *old* used maps to the file's, deeper ones keep their extra relative to the deepest known
    prefix, converted to tabs when the file indents with tabs where *old* used spaces."""
    old_lines = [line for line in old.split("\n") if line.strip()]
    found_lines = [line for line in found.split("\n") if line.strip()]
    mapping: dict[str, str] = {}
    for o, f in zip(old_lines, found_lines, strict=False):
        mapping.setdefault(_indent(o), _indent(f))
    if all(k == v for k, v in mapping.items()):
        return new
    width = 0  # spaces per tab when the file uses tabs where the model used spaces
    for k, v in mapping.items():
        if k and v and set(k) == {" "} and set(v) == {"\t"} and len(k) % len(v) == 0:
            width = len(k) // len(v)
            break
    keys = sorted(mapping, key=len, reverse=True)

    def convert(extra: str) -> str:
        if width and extra and set(extra) == {" "}:
            return "\t" * (len(extra) // width) + " " * (len(extra) % width)
        return extra

    out: list[str] = []
    for line in new.split("\n"):
        if not line.strip():
            out.append(line)
            continue
        ind = _indent(line)
        if ind in mapping:
            out.append(mapping[ind] + line[len(ind) :])
            continue
        base = next((k for k in keys if ind.startswith(k)), None)
        if base is None:
            out.append(line)
        else:
            out.append(mapping[base] + convert(ind[len(base) :]) + line[len(ind) :])
    return "\n".join(out)


# -- applying -------------------------------------------------------------------------------------------------


def _where(index: int | None) -> str:
    return "" if index is None else f"edits[{index}]: "


def _apply_one(text: str, edit: Edit, index: int | None, shown: str) -> tuple[str, str, int, int]:
    """(new text, rule, places changed, offset of the first change)."""
    old, new = edit.old_string, edit.new_string
    if not old:
        raise _error(
            f"{_where(index)}old_string is empty: to create or overwrite a whole file use write_file", "NO_MATCH", index
        )
    if old == new:
        raise _error(
            f"{_where(index)}old_string and new_string are identical: there is nothing to change", "NO_CHANGE", index
        )
    spans = _exact(text, old)
    rule = "exact"
    if not spans:
        rule, spans = "trailing-whitespace", _block_spans(text, old, _rstrip)
    if not spans:
        rule, spans = "indentation", _block_spans(text, old, _strip)
    if not spans:
        rule, spans = "unicode-punctuation", _exact(text.translate(_PUNCTUATION), old.translate(_PUNCTUATION))
        if not spans:
            spans = _block_spans(text, old, _punct_strip)
    if not spans:
        raise _error(
            f"{_where(index)}old_string not found in {shown}, not even ignoring whitespace at line ends, "
            "indentation or typographic quotes and dashes (read_file's line-number prefixes are not part of the "
            "file); read the file again and copy the text",
            "NO_MATCH",
            index,
        )
    if len(spans) > 1 and not edit.replace_all:
        how = "" if rule == "exact" else f" (matching with rule {rule})"
        raise _error(
            f"{_where(index)}old_string matches {len(spans)} times in {shown}{how}; add context to make it "
            "unique or set replace_all",
            "AMBIGUOUS_MATCH",
            index,
        )
    pieces: list[str] = []
    last = 0
    for start, end in spans:
        pieces.append(text[last:start])
        found = text[start:end]
        replacement = new
        if rule in ("indentation", "unicode-punctuation") and found != old:
            replacement = _reindent(new, old, found)
        pieces.append(replacement)
        last = end
    pieces.append(text[last:])
    return "".join(pieces), rule, len(spans), spans[0][0]


def _all_crlf(text: str) -> bool:
    crlf = text.count("\r\n")
    return crlf > 0 and crlf == text.count("\n")


def plan_edits(text: str, edits: Sequence[Edit], *, shown: str = "the file", listed: bool = False) -> EditPlan:
    """The file's new text after *edits*, applied in order to the text in memory (see the module docstring).

    *listed*: the edits came as a list (errors then name ``edits[i]``). Raises :class:`~dsh.tools.ToolError` with the
    first failing edit; the text is never partly changed because nothing is written here."""
    crlf = _all_crlf(text)
    work = text.replace("\r\n", "\n") if crlf else text
    rules: list[str] = []
    counts: list[int] = []
    first = -1
    for i, edit in enumerate(edits):
        if crlf:
            edit = Edit(edit.old_string.replace("\r\n", "\n"), edit.new_string.replace("\r\n", "\n"), edit.replace_all)
        work, rule, count, offset = _apply_one(work, edit, i if listed else None, shown)
        if first < 0:
            first = offset
        rules.append(rule)
        counts.append(count)
    new_text = work.replace("\n", "\r\n") if crlf else work
    if new_text == text:
        raise _error("the edits leave the file as it was: there is nothing to change", "NO_CHANGE")
    head = text.replace("\r\n", "\n")[: max(first, 0)] if crlf else text[: max(first, 0)]
    return EditPlan(new_text, tuple(rules), tuple(counts), head.count("\n") + 1)
