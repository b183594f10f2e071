"""Small text helpers for messages people read."""

from __future__ import annotations

__all__ = ["plural"]


def plural(count: int, word: str, words: str | None = None) -> str:
    """``1 line``, ``2 lines``, ``0 lines``: *count* and the word in the number it takes (*words*, default
    *word* + ``s``)."""
    return f"{count} {word if count == 1 else (words or word + 's')}"
