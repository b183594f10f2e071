"""Small text helpers for messages people read."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["did_you_mean", "plural"]


def plural(count: int, word: str, words: str | None = None) -> str:
    """``1 line``, ``2 lines``, ``0 lines``: *count* and the word in the number it takes (*words*, default
    *word* + ``s``)."""
    return f"{count} {word if count == 1 else (words or word + 's')}"


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'anthropic'?)`` when *name* is close to one of *known* (a typo), else ``""``."""
    import difflib

    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
