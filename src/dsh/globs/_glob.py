"""The one glob dialect: a pattern compiled once, what it covers below a base directory, and the same pattern
as ripgrep's ``--glob`` arguments (see the package README for the dialect, rule by rule).

Guarantees:

* A pattern is read as a line of a ``.gitignore`` placed in the base directory (git's wildmatch, parsed by
  :mod:`pathspec`, never by hand), plus ``{a,b}`` alternation (expanded by :mod:`bracex`), ``\\`` read as ``/``,
  absolute patterns (``/etc/**``, ``~/notes/*.md``) and a leading ``!`` that takes the complement.
* A relative pattern never covers a path outside its base, a negated pattern covers only paths inside its base,
  and a pattern with a ``..`` segment is refused: no spelling widens a pattern to outside the directory it is
  relative to. Only an absolute pattern names paths elsewhere, and only those it names.
* Compiling is cached (:func:`compile_glob`); matching is one regular-expression match per alternative (or, for
  a pattern whose regex could backtrack through combinations of its parts, one per segment, linear in time), with
  no file access. A pattern that could make the matcher backtrack for long (more than :data:`MAX_STARS` ``*`` in
  one segment), expand to more than :data:`MAX_ALTERNATIVES` alternatives or exceed :data:`MAX_LENGTH`
  characters is refused with a :class:`GlobError` a user or a model can act on.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["MAX_ALTERNATIVES", "MAX_LENGTH", "MAX_STARS", "Glob", "GlobError", "compile_glob", "has_magic"]

MAX_LENGTH = 4096
"""The longest pattern accepted (characters, as written)."""
MAX_ALTERNATIVES = 64
"""The most alternatives ``{a,b}`` may expand to (``{a,b}{c,d}`` is four)."""
MAX_STARS = 2
"""The most ``*`` in one path segment (``**`` counts once). Python's regular expressions backtrack: three in a
segment cost about a second against a crafted 255-character name, four about forty (RFC 0041)."""

_MAGIC = re.compile(r"[*?\[]")


class GlobError(ValueError):
    """A pattern that is refused, with a message that says how to write it instead."""


def has_magic(text: str) -> bool:
    """Whether *text* holds a wildcard (``*``, ``?``, ``[``) or an alternation (``{``): it is a glob, not a path."""
    return bool(_MAGIC.search(text)) or "{" in text


@dataclass(frozen=True, slots=True)
class _Alternative:
    absolute: bool
    """Anchored at the file system's root (else at the base directory)."""
    anchored: bool
    """Matched from the start of the path (else its last segments may match at any depth)."""
    body: str
    """The pattern without its leading ``/``: ``""`` names the anchor itself (everything below it)."""
    regex: re.Pattern[str] | None
    """The compiled match over the path relative to the anchor (pathspec's, whole); None: everything below the
    anchor."""
    segments: tuple[re.Pattern[str] | None, ...] | None = None
    """When the whole regex could backtrack for long (see :func:`_linear`): one pathspec match per segment, None
    for ``**``, matched segment by segment instead (:func:`_walk`)."""


@dataclass(frozen=True, slots=True)
class Glob:
    """A compiled pattern (make one with :func:`compile_glob`)."""

    text: str
    """The pattern as written."""
    negated: bool
    alternatives: tuple[_Alternative, ...]

    @property
    def literal(self) -> bool:
        """No wildcard, no alternation, no negation: the pattern names one path (and what is below it)."""
        return not self.negated and len(self.alternatives) == 1 and not has_magic(self.alternatives[0].body)

    @property
    def absolute(self) -> bool:
        """Every alternative is an absolute path pattern (it means the same whatever the base)."""
        return all(alternative.absolute for alternative in self.alternatives)

    def covers(self, path: str, base: str) -> bool:
        """Whether the pattern covers the absolute *path*, relative patterns being relative to the absolute
        directory *base*. Both are normalised lexically (no symlink is resolved here: callers that care resolve
        both spellings and ask twice). A path outside *base* is covered only by an absolute alternative that
        names it, never by a negated pattern."""
        path = os.path.normpath(path)
        inside = _below(path, os.path.normpath(base))
        if self.negated:
            return inside is not None and not any(
                _hit(alternative, inside if not alternative.absolute else path[1:]) for alternative in self.alternatives
            )
        for alternative in self.alternatives:
            if alternative.absolute:
                if _hit(alternative, path[1:]):
                    return True
            elif inside is not None and _hit(alternative, inside):
                return True
        return False

    def resolved(self, base: str, resolve: Callable[[str], str]) -> Glob:
        """The pattern with the literal directories it starts with (``src`` in ``src/**``, ``/tmp/x`` in
        ``/tmp/x/*.md``) replaced by ``resolve`` of their absolute path (``os.path.realpath``): the spelling that
        :meth:`covers` compares with a resolved path. Alternatives without such a head (``*.md``, ``**/x``) are
        kept; they are relative to whatever base the caller passes then (its resolved spelling)."""
        alternatives = []
        for alternative in self.alternatives:
            directory = alternative.body.endswith("/")
            segments = alternative.body.rstrip("/").split("/")
            literal = 0
            while literal < len(segments) and segments[literal] and not has_magic(segments[literal]):
                literal += 1
            if not alternative.anchored or literal == 0:
                alternatives.append(alternative)
                continue
            head = "/".join(segments[:literal])
            real = resolve("/" + head if alternative.absolute else os.path.join(base, head))
            body = "/".join([_quote(real.strip("/")), *segments[literal:]]).strip("/") + ("/" if directory else "")
            alternatives.append(_compiled(True, True, "" if body == "/" else body))
        return Glob(self.text, self.negated, tuple(alternatives))

    def ripgrep_globs(self, prefix: str = "") -> tuple[str, ...] | None:
        """``--glob`` arguments that make ripgrep, run in a directory whose ``/``-separated path to the base is
        *prefix* (``""``: the base itself), select at least the files this pattern covers: each alternative as a
        path and as a directory whose contents are covered. None when ripgrep's globs cannot say it (a negated
        pattern, an absolute alternative): search without them. Callers filter ripgrep's answer with
        :meth:`covers`, so a wider selection never shows; a narrower one cannot happen."""
        if self.negated or any(alternative.absolute for alternative in self.alternatives):
            return None
        head = "/" + prefix.strip("/") if prefix.strip("/") else ""
        globs: list[str] = []
        for alternative in self.alternatives:
            body = alternative.body.rstrip("/")
            if not body:
                return None  # everything below the base: no glob needed
            anchored = [f"{head}/{body}", f"{head}/{body}/**"]
            forms = anchored if alternative.anchored else [body, f"**/{body}/**"]
            globs += forms[1:] if alternative.body.endswith("/") else forms
        return tuple(globs)


def _below(path: str, base: str) -> str | None:
    """*path* relative to *base* with ``/`` (``""`` for *base* itself), or None when it is not below it."""
    if path == base:
        return ""
    prefix = base if base.endswith(os.sep) else base + os.sep
    if not path.startswith(prefix):
        return None
    relative = path[len(prefix) :]
    return relative if os.sep == "/" else relative.replace(os.sep, "/")


def _hit(alternative: _Alternative, relative: str) -> bool:
    if alternative.regex is None:
        return True
    if not relative:
        return False
    if alternative.segments is not None:
        return _walk(alternative.segments, alternative.body.endswith("/"), relative.split("/"))
    return alternative.regex.match(relative) is not None


def _walk(items: tuple[re.Pattern[str] | None, ...], directory: bool, names: list[str]) -> bool:
    """The same answer as the whole regex, in time linear in the path's segments times the pattern's: the set of
    segment positions each item can reach (``**``: any number of segments, at least one when last). A pattern
    that consumed some but not all segments matched a directory, which covers what is inside it."""
    count = len(names)
    reach = [0]
    last = len(items) - 1
    for index, item in enumerate(items):
        if not reach:
            return False
        if item is None:
            start = reach[0] + (1 if index == last else 0)
            reach = list(range(start, count + 1))
        else:
            reach = [position + 1 for position in reach if position < count and item.match(names[position])]
    return any(0 < position < count or (position == count and not directory) for position in reach)


@lru_cache(maxsize=1024)
def compile_glob(text: str) -> Glob:
    """*text* compiled (cached: a rule or a tool compiles a pattern once, however often it matches). Raises
    :class:`GlobError` for a pattern that is empty, too long, too costly, or holds a ``..`` segment."""
    if not isinstance(text, str):
        raise GlobError(f"{text!r} is not a pattern")
    pattern = text.strip()
    if not pattern:
        raise GlobError("an empty pattern names nothing: write a path or a glob such as src/** or *.md")
    if len(pattern) > MAX_LENGTH:
        raise GlobError(f"a pattern of {len(pattern)} characters is too long (at most {MAX_LENGTH})")
    negated = pattern.startswith("!")
    if negated:
        pattern = pattern[1:].lstrip()
        if not pattern:
            raise GlobError(f"{text!r}: a ! must be followed by the pattern it negates")
    pattern = pattern.replace("\\", "/")
    alternatives = tuple(_alternative(text, expanded) for expanded in _expand(text, pattern))
    return Glob(text, negated, alternatives)


def _expand(text: str, pattern: str) -> list[str]:
    if "{" not in pattern:
        return [pattern]
    import bracex

    try:
        expanded = bracex.expand(pattern, limit=MAX_ALTERNATIVES)
    except bracex.ExpansionLimitException as exc:
        raise GlobError(f"{text!r} expands to more than {MAX_ALTERNATIVES} alternatives: write fewer braces") from exc
    except (ValueError, RuntimeError) as exc:  # an unbalanced brace is taken literally by bracex; anything else
        raise GlobError(f"{text!r} cannot be expanded: {exc}") from exc
    return list(dict.fromkeys(expanded)) or [pattern]


def _alternative(text: str, pattern: str) -> _Alternative:
    if pattern == "~" or pattern.startswith("~/"):
        pattern = os.path.expanduser(pattern).replace(os.sep, "/")
    absolute = pattern.startswith("/")
    directory = pattern.endswith("/")
    segments = [segment for segment in pattern.split("/") if segment]
    if pattern.startswith("!"):  # only from inside braces: the pattern's own leading ! was taken off
        raise GlobError(f"{text!r}: ! negates only the whole pattern, at its start")
    if ".." in segments:
        raise GlobError(
            f"{text!r} holds a '..' segment: a pattern never reaches above its directory; write an absolute "
            "path (or ~/...) to name another directory"
        )
    dotted = bool(segments) and segments[0] == "." and not absolute
    segments = [segment for segment in segments if segment != "."]
    for segment in segments:
        stars = len(re.findall(r"\*+", segment))
        if stars > MAX_STARS and segment != "**":
            raise GlobError(
                f"{text!r} has {stars} '*' in the segment {segment!r}: at most {MAX_STARS} (split the pattern "
                "with {a,b} or match less precisely)"
            )
    body = "/".join(segments) + ("/" if directory and segments else "")
    anchored = absolute or dotted or "/" in body.rstrip("/")
    try:
        return _compiled(absolute, anchored, body)
    except ValueError:
        raise GlobError(f"{text!r} is not a pattern git can read") from None


@lru_cache(maxsize=1024)
def _compiled(absolute: bool, anchored: bool, body: str) -> _Alternative:
    if not body or body == "**" or body == "**/":
        return _Alternative(absolute, True, "", None)
    from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern

    line = "/" + body if anchored else (("[#]" + body[1:]) if body.startswith("#") else body)
    source, include = GitIgnoreSpecPattern.pattern_to_regex(line)
    if source is None or include is not True:
        raise ValueError(body)
    with warnings.catch_warnings():  # "[[]" is a class of "[" in a glob; re warns that it may change one day
        warnings.simplefilter("ignore", FutureWarning)
        regex = re.compile(source)
        names = body.rstrip("/").split("/")
        if _linear(names, anchored):
            return _Alternative(absolute, anchored, body, regex)
        items: list[re.Pattern[str] | None] = [] if anchored else [None]
        for name in names:
            if name != "**":
                items.append(re.compile(GitIgnoreSpecPattern.pattern_to_regex("/" + name)[0] or "(?!)"))
            elif items[-1:] != [None]:
                items.append(None)
        return _Alternative(absolute, anchored, body, regex, tuple(items))


def _linear(names: list[str], anchored: bool) -> bool:
    """Whether pathspec's whole regex stays linear: at most one part that spans directories (a leading or inner
    ``**``, or the any-depth start of a pattern without ``/``; a last ``**`` is free) and at most one segment with
    a ``*``. Every pattern people write is (``*.md``, ``src/**``, ``docs/**/*.md``, ``**/.env``); one that is not,
    (``**/a/**/b``, ``*/*/*.md``) is matched segment by segment: the regex engine backtracks through every
    combination of its parts (``**/*a*/*a*/*a*/b`` took 70 s against a crafted 4,096-character path)."""
    spanning = (0 if anchored else 1) + sum(1 for name in names[:-1] if name == "**")
    starred = sum(1 for name in names if "*" in name and name != "**")
    return spanning <= 1 and starred <= 1


def _quote(path: str) -> str:
    """*path* (a real file name) as a pattern that matches only itself: git's escape before its wildcards and
    backslashes (the body handed to pathspec is past the dialect's reading of ``\\`` as a separator)."""
    return re.sub(r"[*?\[\\]", lambda match: "\\" + match.group(0), path)
