"""What a configured path rule meant before the one glob dialect (RFC 0041) and whether it means something else
now: the lines of the start-up warning and of the notice the daemon gives once.

The old rule dialect read a scope relative to the session's directory and anchored there: a scope without a
wildcard covered that path and what is below it, ``*`` and ``?`` stayed within a segment, ``**`` spanned
segments, and every other character (``{``, ``[``, ``!``, ``\\``) was literal. Only patterns whose meaning moved
are reported; each line says what the rule covers now and how to write the old meaning.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from dsh.globs import has_magic
from dsh.policy._rules import PREFIX_TOOLS, Rule

__all__ = ["meaning_changes"]


def _why(scope: str) -> list[str]:
    text = scope.strip()
    reasons: list[str] = []
    if text.startswith("!"):
        reasons.append("a leading ! now takes the complement (it was part of the name)")
    if "{" in text or "[" in text:
        reasons.append("{a,b} and [abc] are now alternatives and character classes (they were literal)")
    if "\\" in text:
        reasons.append("\\ is now a separator like / (it was part of the name)")
    plain = text.lstrip("!").replace("\\", "/")
    relative = not plain.startswith(("/", "~"))
    if relative and not plain.startswith("./") and "/" not in plain.rstrip("/") and plain not in (".", "**"):
        reasons.append(
            f"it now covers {plain.rstrip('/')} at every depth below the session's directory (it covered only the "
            f"session's directory itself): write ./{plain} for the old meaning"
        )
    last = plain.rstrip("/").rsplit("/", 1)[-1]
    if has_magic(last) and last != "**":
        reasons.append("it now also covers what is inside the directories it matches, as .gitignore does")
    if re.search(r"[^/]\*\*|\*\*[^/]", plain):
        reasons.append("** inside a name is now one * (it spanned directories)")
    return reasons


def meaning_changes(rules: Iterable[Rule]) -> list[str]:
    """One line per configured path rule whose meaning changed, in the rules' order (empty: none did)."""
    lines = []
    for rule in rules:
        if rule.origin != "config" or rule.scope is None or rule.tool in PREFIX_TOOLS:
            continue
        reasons = _why(rule.scope)
        if reasons:
            lines.append(f"{rule.decision} {rule.pattern()}: {'; '.join(reasons)}")
    return lines
