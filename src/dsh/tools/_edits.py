"""The edit matcher: where ``old_string`` is in a file's text, under progressively looser rules, and the new text.

A pure module (no I/O): :func:`plan_edits` takes the file's text and a list of :class:`Edit` and returns the new
text, or raises :class:`~dsh.tools.ToolError` naming the edit that failed. Nothing here writes; the caller writes the
result once, so an edit list with a failing member changes nothing.

Guarantees:

* Rules, in order, each tried only when every earlier one found nothing: ``exact`` (the string as given);
  ``trailing-whitespace`` (whole lines equal once trailing blanks are dropped); ``indentation`` (whole lines
  equal once leading and trailing blanks are dropped: ``new_string`` is re-indented by the indentation the
  file's block really has, tabs for spaces included); ``unicode-punctuation`` (typographic quotes, dashes and
  the common non-breaking spaces read as their ASCII forms, first within lines, then line by line with blanks
  dropped). Then four looser rules (:data:`STRICT_RULES`), each applied only when it finds exactly one place,
  ``replace_all`` or not: ``escaped`` (``old_string`` typed with literal ``\\n``, ``\\t``, ``\\"`` … whose
  literal text is absent: both strings unescaped, then the rules above); ``unicode-spaces`` (the rest of
  codex's space table: U+2000-U+200A, U+205F, U+3000 and the others as a plain space); ``inner-whitespace``
  (runs of spaces and tabs inside a line read as one space); ``blank-edge-lines`` (blank lines at the start or
  end of ``old_string`` that the file does not have dropped, with as many from ``new_string``'s edges).
* A rule applies only when it finds exactly one place (or ``replace_all`` is set, for the first four); a rule
  that finds several stops the search with ``AMBIGUOUS_MATCH`` naming the line of every place: a looser rule
  would only find more, and guessing which one is meant is how a wrong change gets written. Nothing is matched
  by similarity (edit distance, anchor lines, the first of several): a miss is ``NO_MATCH`` with the closest
  lines of the file and their numbers (at most :data:`CLOSEST` candidates of :data:`CLOSEST_LINES` lines).
* Indentation: a match that starts after nothing but whitespace on its line, with a one-line ``old_string``
  and a ``new_string`` of several lines, gets the added lines indented by that line's indentation (relative
  to ``old_string``'s own, as the ``indentation`` rule does), unless they already carry it and the first line
  opens no block (then they were written with the file's indentation and are kept as typed).
* Line endings: ``old_string`` and ``new_string`` are read with the file's line endings: a file whose line
  breaks are all CRLF is matched as LF text and written back with CRLF (the model never types ``\\r``); a file
  without CRLF never gets one from a CRLF typed in either string; in a file with mixed endings a replacement
  takes the endings of the text it replaces. A final newline, a byte-order mark and any text outside the
  matched places are kept byte for byte.
* The outcome says which rule each edit used; the first changed line is given for the card.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dsh.tools._errors import ToolError

__all__ = ["CLOSEST", "CLOSEST_LINES", "RULES", "STRICT_RULES", "Edit", "EditPlan", "plan_edits"]

RULES = (
    "exact",
    "trailing-whitespace",
    "indentation",
    "unicode-punctuation",
    "escaped",
    "unicode-spaces",
    "inner-whitespace",
    "blank-edge-lines",
)
STRICT_RULES = frozenset({"escaped", "unicode-spaces", "inner-whitespace", "blank-edge-lines"})
"""Rules that apply only when exactly one place matches, even with ``replace_all``."""
CLOSEST = 3
"""Candidate places a ``NO_MATCH`` shows."""
CLOSEST_LINES = 10
"""Lines shown per candidate (at most)."""
CLOSEST_WIDTH = 200
"""Characters of one shown line (the rest is cut and marked)."""
AMBIGUOUS_SHOWN = 50
"""Line numbers an ``AMBIGUOUS_MATCH`` lists (the count is always given)."""

_PUNCTUATION_TABLE = {
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
_PUNCTUATION = str.maketrans(_PUNCTUATION_TABLE)
"""One character for one character: positions in the normalised text are positions in the original."""
_SPACES = str.maketrans(
    {
        **_PUNCTUATION_TABLE,
        **{chr(code): " " for code in (0x2000, 0x2001, 0x2004, 0x2005, 0x2006, 0x2008, 0x200A, 0x205F, 0x3000)},
        "\u1680": " ",
        "\u180e": " ",
    }
)
"""The punctuation table plus the rest of codex's spaces (``seek_sequence``'s table and its neighbours)."""

_INDENT = re.compile(r"[^\S\n]*")
"""Leading whitespace as str.strip sees it (so the indentation rule never drops an odd space it matched over)."""
_RUN = re.compile(r"[ \t]+")
_ESCAPE = re.compile(r"\\(n|t|r|\"|'|`|\\)")
_UNESCAPED = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "'": "'", "`": "`", "\\": "\\"}
_OPENERS = (":", "{", "(", "[", "\\", "=>", "->")
_NUMBERED = re.compile(r"^\s*\d+\t")


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


def _error(message: str, code: str) -> ToolError:
    return ToolError(message, code)


# -- finding --------------------------------------------------------------------------------------------------

Span = tuple[int, int]


def _exact(text: str, old: str) -> list[Span]:
    spans: list[Span] = []
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


def _identity(text: str) -> str:
    return text


def _punctuated(text: str) -> str:
    return text.translate(_PUNCTUATION).replace("\u2026", "...")


def _spaced(text: str) -> str:
    return text.translate(_SPACES).replace("\u2026", "...")


def _runs_collapsed(text: str) -> str:
    return _RUN.sub(" ", text)


def _block_spans(
    text: str, old: str, line_key: Callable[[str], str], whole: Callable[[str], str] = _identity
) -> list[Span]:
    """Places where whole lines of *text* equal *old*'s lines under a key (non-overlapping, in order): *whole*
    applied to the whole text (a 1:1 character table, or a change that never crosses a line break), then
    *line_key* (``str.strip``, ``str.rstrip``) to each line. The span runs from the first line's start to the last
    line's end, plus its newline when *old* ends with one. The keys are computed by C-level maps and the first
    line is searched with ``list.index``: a 500 KB file costs milliseconds per rule."""
    old_lines = old.split("\n")
    with_newline = old_lines[-1] == "" and len(old_lines) > 1
    if with_newline:
        old_lines.pop()
    wanted = list(map(line_key, whole("\n".join(old_lines)).split("\n")))
    if not any(wanted):
        return []  # only blank lines: every blank run would match
    lines = text.split("\n")
    keys = list(map(line_key, whole(text).split("\n")))
    if len(keys) != len(lines):  # a normaliser that moved line breaks: not comparable line by line
        return []
    n = len(wanted)
    first, rest = wanted[0], wanted[1:]
    starts: list[int] | None = None
    spans: list[Span] = []
    i = 0
    limit = len(lines) - n
    while i <= limit:
        try:
            i = keys.index(first, i, limit + 1)
        except ValueError:
            break
        if keys[i + 1 : i + n] != rest:
            i += 1
            continue
        last = i + n - 1
        if with_newline and last + 1 >= len(lines):  # no newline after the last line: not the same block
            i += 1
            continue
        if starts is None:
            starts = [0]
            for line in lines:
                starts.append(starts[-1] + len(line) + 1)
        end = starts[last] + len(lines[last]) + (1 if with_newline else 0)
        spans.append((starts[i], end))
        i += n
    return spans


def _inner_spans(text: str, old: str) -> list[Span]:
    """Runs of spaces and tabs inside lines read as one: within a line for a one-line *old* (a regular
    expression whose gaps are ``[ \\t]+`` where *old* had blanks), else whole lines compared with runs collapsed."""
    if "\n" in old.rstrip("\n"):
        return _block_spans(text, old, str.strip, _runs_collapsed)
    pieces = _RUN.split(old.strip(" \t"))
    if not any(pieces):
        return []
    body = r"[ \t]+".join(re.escape(piece) for piece in pieces)
    # old_string with its own indentation starts a line: so does the place (its indentation then re-mapped)
    pattern = re.compile(r"(?m)^[ \t]*" + body if old[:1] in " \t" else body)
    return [match.span() for match in pattern.finditer(text)]


def _unescape(text: str) -> str:
    return _ESCAPE.sub(lambda match: _UNESCAPED[match.group(1)], text)


def _basic(text: str, old: str) -> tuple[str, list[Span]]:
    """The first four rules, in order: (rule, places) of the first that finds any (``exact`` and no places when
    none does)."""
    spans = _exact(text, old)
    if spans:
        return "exact", spans
    spans = _block_spans(text, old, str.rstrip)
    if spans:
        return "trailing-whitespace", spans
    spans = _block_spans(text, old, str.strip)
    if spans:
        return "indentation", spans
    spans = _exact(text.translate(_PUNCTUATION), old.translate(_PUNCTUATION)) or _block_spans(
        text, old, str.strip, _punctuated
    )
    if spans:
        return "unicode-punctuation", spans
    return "exact", []


@dataclass(frozen=True, slots=True)
class _Found:
    rule: str
    spans: list[Span]
    old: str
    """The ``old_string`` that matched (unescaped or without its blank edge lines for those rules)."""
    new: str
    """The ``new_string`` to put in (transformed the same way)."""
    inner: str
    """The rule that placed the match: re-indentation follows it (``rule`` itself for the plain rules)."""


def _blank_edges(old: str, new: str) -> tuple[str, str] | None:
    """*old* without the blank lines at its start and end, and *new* without as many at its own (None when
    *old* has none or nothing else)."""
    lead = re.match(r"(?:[ \t]*\n)+", old)
    trail = re.search(r"(?:\n[ \t]*)+$", old)
    start = lead.end() if lead else 0
    end = trail.start() if trail else len(old)
    if (start == 0 and end == len(old)) or start >= end or not old[start:end].strip():
        return None
    head, tail = old[:start].count("\n"), old[end:].count("\n")
    for _ in range(head):
        cut = re.match(r"[ \t]*\n", new)
        if cut is None:
            break
        new = new[cut.end() :]
    for _ in range(tail):
        cut = re.search(r"\n[ \t]*$", new)
        if cut is None:
            break
        new = new[: cut.start()]
    return old[start:end], new


def _word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def _whole(text: str, spans: list[Span], old: str) -> list[Span]:
    """*spans* without the places a loose rule found inside a longer word: a place whose first (last) character
    is a letter, digit or underscore must not have one just before (after) it (``value = 1`` is not the start of
    ``value  = 10``). *old* is what was looked for (kept for the reader: the place's own edges decide)."""
    kept = []
    for start, end in spans:
        if start < end and _word_char(text[start]) and _word_char(text[start - 1 : start]):
            continue
        if start < end and _word_char(text[end - 1]) and _word_char(text[end : end + 1]):
            continue
        kept.append((start, end))
    return kept


def _find(text: str, old: str, new: str) -> _Found:
    rule, spans = _basic(text, old)
    if spans:
        return _Found(rule, spans, old, new, rule)
    if _ESCAPE.search(old):
        plain_old = _unescape(old)
        rule, spans = _basic(text, plain_old)
        spans = _whole(text, spans, plain_old)
        if spans:
            return _Found("escaped", spans, plain_old, _unescape(new), rule)
    spans = _exact(text.translate(_SPACES), old.translate(_SPACES)) or _block_spans(text, old, str.strip, _spaced)
    spans = _whole(text, spans, old)
    if spans:
        return _Found("unicode-spaces", spans, old, new, "unicode-punctuation")
    spans = _whole(text, _inner_spans(text, old), old)
    if spans:
        return _Found("inner-whitespace", spans, old, new, "inner-whitespace")
    trimmed = _blank_edges(old, new)
    if trimmed is not None:
        found = _find(text, *trimmed)
        if found.spans:
            return _Found("blank-edge-lines", found.spans, found.old, found.new, found.inner)
    return _Found("exact", [], old, new, "exact")


# -- re-indenting ---------------------------------------------------------------------------------------------


def _indent(line: str) -> str:
    match = _INDENT.match(line)
    return match.group(0) if match else ""


def _reindent(new: str, old: str, found: str, *, skip_first: bool = False) -> str:
    """*new* with its indentation moved from *old*'s to what the file's block *found* really has: each
    indentation *old* used maps to the file's, deeper ones keep their extra relative to the deepest known
    prefix, converted to tabs when the file indents with tabs where *old* used spaces. *skip_first*: *new*'s
    first line is left as it is (it follows text of the file's line)."""
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
    for number, line in enumerate(new.split("\n")):
        if not line.strip() or (skip_first and number == 0):
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


def _inline_indent(text: str, start: int, old: str, new: str) -> str:
    """*new* for a one-line *old* matched at *start* after only whitespace on its line: its added lines get
    that line's indentation (see the module docstring); anything else unchanged."""
    if "\n" not in new or "\n" in old.rstrip("\n"):
        return new
    line_start = text.rfind("\n", 0, start) + 1
    prefix = text[line_start:start]
    if not prefix or prefix.strip(" \t"):
        return new
    full = prefix + _indent(old)
    lines = new.split("\n")
    added = [line for line in lines[1:] if line.strip()]
    if not added:
        return new
    if all(line.startswith(full) for line in added) and not lines[0].rstrip().endswith(_OPENERS):
        return new  # written with the file's own indentation
    return _reindent(new, old, full + old.lstrip(" \t"), skip_first=True)


def _endings_like(found: str, new: str) -> str:
    """*new* with CRLF line breaks when the text it replaces has only CRLF ones (a file with mixed endings)."""
    if "\n" in found and found.count("\r\n") == found.count("\n"):
        return new.replace("\r\n", "\n").replace("\n", "\r\n")
    return new


# -- messages -------------------------------------------------------------------------------------------------


def _where(index: int | None) -> str:
    return "" if index is None else f"edits[{index}]: "


def _line_of(starts: list[int], offset: int) -> int:
    """1-based line holding *offset* (binary search over the line starts)."""
    lo, hi = 0, len(starts) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if starts[mid] <= offset:
            lo = mid
        else:
            hi = mid - 1
    return lo + 1


def _words(line: str) -> frozenset[str]:
    return frozenset(line.split())


def _jaccard(want: frozenset[str], got: frozenset[str]) -> float:
    if not want and not got:
        return 1.0
    common = len(want & got)
    return common / (len(want) + len(got) - common) if common else 0.0


def _closest(text: str, old: str) -> list[tuple[int, list[str]]]:
    """Up to :data:`CLOSEST` places of *text* most like *old*, best first: (first line number, lines). Each
    window of as many lines as *old* has (at most :data:`CLOSEST_LINES`) is scored by the mean token overlap of
    its lines with *old*'s; overlapping windows and poor ones (under a third) are left out. O(lines x window)."""
    wanted = [_words(line) for line in old.strip("\n").split("\n")[:CLOSEST_LINES]]
    if not any(wanted):
        return []
    lines = text.split("\n")
    if lines and lines[-1] == "" and len(lines) > 1:
        lines.pop()
    have = list(map(_words, lines))
    n = len(wanted)
    # one list of line similarities per line of old_string, then each window's sum over the shifted lists
    sims = [[_jaccard(want, got) for got in have] for want in wanted]
    if len(have) < n:  # a file shorter than old_string: its lines against the first ones
        sims = [row + [0.0] * (n - len(have)) for row in sims]
    totals = map(sum, zip(*(row[k:] for k, row in enumerate(sims)), strict=False))  # windows inside the file
    scored = [(total / n, i) for i, total in enumerate(totals) if total]
    scored.sort(key=lambda item: (-item[0], item[1]))
    picked: list[tuple[int, list[str]]] = []
    taken: list[int] = []
    for score, i in scored:
        if score < 1 / 3 or len(picked) >= CLOSEST:
            break
        if any(abs(i - j) < n for j in taken):
            continue
        taken.append(i)
        picked.append((i + 1, lines[i : i + n]))
    return picked


def _numbered(first: int, lines: list[str]) -> str:
    out = []
    for k, line in enumerate(lines):
        line = line.removesuffix("\r")
        if len(line) > CLOSEST_WIDTH:
            line = line[:CLOSEST_WIDTH] + " …"
        out.append(f"{first + k:>6}\t{line}")
    return "\n".join(out)


def _not_found(text: str, old: str, index: int | None, shown: str) -> ToolError:
    message = (
        f"{_where(index)}old_string not found in {shown}, not even ignoring whitespace at line ends, indentation, "
        "runs of blanks, blank edge lines, typographic quotes, dashes and spaces or escaped newlines and quotes "
        "(similar text is never guessed at)."
    )
    old_lines = [line for line in old.split("\n") if line.strip()]
    if old_lines and all(_NUMBERED.match(line) for line in old_lines):
        message += " It starts its lines with read_file's line numbers, which are not part of the file: leave them out."
    candidates = _closest(text, old)
    if candidates:
        parts = [message, "The closest lines in the file:"]
        for first, lines in candidates:
            parts.append(_numbered(first, lines))
            parts.append("")
        parts.append(
            "Copy old_string from the right place exactly (without the line-number prefix), or read the file "
            "again if it changed."
        )
        return _error("\n".join(parts).rstrip(), "NO_MATCH")
    return _error(
        message + " Nothing in the file resembles it: read the file again (read_file, or grep for a distinctive "
        "word) and copy the text exactly.",
        "NO_MATCH",
    )


def _ambiguous(text: str, spans: list[Span], found: _Found, index: int | None, shown: str) -> ToolError:
    starts = _line_starts(text)
    numbers = [_line_of(starts, start) for start, _ in spans]
    listed = ", ".join(str(n) for n in numbers[:AMBIGUOUS_SHOWN])
    if len(numbers) > AMBIGUOUS_SHOWN:
        listed += f" and {len(numbers) - AMBIGUOUS_SHOWN} more"
    how = "" if found.rule == "exact" else f" (matching with rule {found.rule})"
    if found.rule in STRICT_RULES:
        fix = (
            f"rule {found.rule} applies only to a single place, even with replace_all; copy old_string exactly "
            "from the file, with enough surrounding lines to make it unique"
        )
    else:
        fix = "add surrounding lines to old_string to make it unique, or set replace_all to change every one"
    return _error(
        f"{_where(index)}old_string matches {len(spans)} times in {shown}{how}, at lines {listed}; {fix}",
        "AMBIGUOUS_MATCH",
    )


# -- applying -------------------------------------------------------------------------------------------------


def _apply_one(text: str, edit: Edit, index: int | None, shown: str, *, mixed: bool) -> tuple[str, str, int, int]:
    """(new text, rule, places changed, offset of the first change)."""
    old, new = edit.old_string, edit.new_string
    if not old:
        raise _error(
            f"{_where(index)}old_string is empty: to create or overwrite a whole file use write_file "
            "(or give the text to replace)",
            "NO_MATCH",
        )
    if old == new:
        raise _error(
            f"{_where(index)}old_string and new_string are identical: there is nothing to change; give the new "
            "text in new_string",
            "NO_CHANGE",
        )
    found = _Found("exact", [], old, new, "exact")
    if mixed and "\n" in old and not _exact(text, old):  # mixed endings: the CRLF form of old_string, exactly
        crlf_old = old.replace("\n", "\r\n")
        spans = _exact(text, crlf_old)
        if spans:
            found = _Found("exact", spans, crlf_old, new.replace("\n", "\r\n"), "exact")
    if not found.spans:
        found = _find(text, old, new)
    spans = found.spans
    if not spans:
        raise _not_found(text, old, index, shown)
    if len(spans) > 1 and (not edit.replace_all or found.rule in STRICT_RULES):
        raise _ambiguous(text, spans, found, index, shown)
    pieces: list[str] = []
    last = 0
    for start, end in spans:
        pieces.append(text[last:start])
        matched = text[start:end]
        replacement = found.new
        if found.inner in ("indentation", "unicode-punctuation", "inner-whitespace") and matched != found.old:
            replacement = _reindent(replacement, found.old, matched)
        replacement = _inline_indent(text, start, found.old, replacement)
        if mixed:
            replacement = _endings_like(matched, replacement)
        pieces.append(replacement)
        last = end
    pieces.append(text[last:])
    return "".join(pieces), found.rule, len(spans), spans[0][0]


def plan_edits(text: str, edits: Sequence[Edit], *, shown: str = "the file", listed: bool = False) -> EditPlan:
    """The file's new text after *edits*, applied in order to the text in memory (see the module docstring).

    *listed*: the edits came as a list (errors then name ``edits[i]``). Raises :class:`~dsh.tools.ToolError` with the
    first failing edit; the text is never partly changed because nothing is written here."""
    crlf = text.count("\r\n")
    all_crlf = crlf > 0 and crlf == text.count("\n")
    mixed = crlf > 0 and not all_crlf
    work = text.replace("\r\n", "\n") if all_crlf else text
    rules: list[str] = []
    counts: list[int] = []
    first = -1
    for i, edit in enumerate(edits):
        # The model's strings take the file's line endings: LF in the text worked on (a CRLF file is worked on
        # as LF and written back with CRLF; a mixed one gets each replacement's endings from what it replaces).
        edit = Edit(edit.old_string.replace("\r\n", "\n"), edit.new_string.replace("\r\n", "\n"), edit.replace_all)
        work, rule, count, offset = _apply_one(work, edit, i if listed else None, shown, mixed=mixed)
        if first < 0:
            first = offset
        rules.append(rule)
        counts.append(count)
    new_text = work.replace("\n", "\r\n") if all_crlf else work
    if new_text == text:
        raise _error(
            "the edits leave the file as it was: there is nothing to change; check old_string and new_string",
            "NO_CHANGE",
        )
    head = text.replace("\r\n", "\n")[: max(first, 0)] if all_crlf else text[: max(first, 0)]
    return EditPlan(new_text, tuple(rules), tuple(counts), head.count("\n") + 1)
