"""The one JSON nesting limit, enforced where data enters dsh (frames, model output, tool arguments).

Why: every recursive encoder and decoder on our paths has its own ceiling (the stdlib's C scanner and encoder
stop near the interpreter's recursion limit, ~1000; orjson's ``dumps`` at 254 levels; ``copy_json`` and any
pure-Python walk at the recursion limit). A value that passes one of them and trips the next used to be logged
in memory and never reach the session file, leaving it unloadable. So nothing deeper than
:data:`MAX_JSON_DEPTH` is accepted from outside, far below every ceiling, and our own events add fewer than
:data:`ENVELOPE_DEPTH` levels on top (the session log accepts ``MAX_JSON_DEPTH + ENVELOPE_DEPTH``).

Depth counts containers: ``1`` and ``"x"`` have depth 0, ``[]`` and ``{}`` depth 1, ``{"a": [1]}`` depth 2.
The checks here are iterative (no recursion), stop at the first level past the limit, and have a C-speed
pre-filter for text (a value cannot be deeper than the number of its opening brackets).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ENVELOPE_DEPTH",
    "MAX_JSON_DEPTH",
    "MAX_LOG_DEPTH",
    "TooDeepError",
    "check_depth",
    "exceeds_depth",
    "text_may_exceed",
]

MAX_JSON_DEPTH = 128
"""The deepest nesting accepted from a client (a whole frame), a model (a chunk, tool-call arguments) or a
tool's arguments."""

ENVELOPE_DEPTH = 16
"""Room for the levels our own events wrap around outside data (``data.source.shown[i]._meta`` …); < 10 today."""

MAX_LOG_DEPTH = MAX_JSON_DEPTH + ENVELOPE_DEPTH
"""The deepest event ``data`` a session log accepts (checked on append and on load)."""


class TooDeepError(ValueError):
    """A JSON value nests deeper than allowed; the message says where and what the limit is."""


def exceeds_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether *value* (parsed JSON: dicts, lists, tuples, scalars) nests more than *limit* containers deep.

    Iterative and cheap: scalars cost nothing, and the walk stops at the first container past the limit."""
    kind = type(value)
    if kind is not dict and kind is not list and kind is not tuple:
        return False
    stack: list[tuple[Any, int]] = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        node, depth = pop()
        if depth > limit:
            return True
        items = node.values() if type(node) is dict else node
        below = depth + 1
        for item in items:
            item_kind = type(item)
            if item_kind is dict or item_kind is list or item_kind is tuple:
                push((item, below))
    return False


def check_depth(value: Any, what: str, limit: int = MAX_JSON_DEPTH) -> None:
    """Raise :class:`TooDeepError` naming *what* if *value* nests deeper than *limit*."""
    if exceeds_depth(value, limit):
        raise TooDeepError(f"{what} is nested deeper than {limit} levels")


def text_may_exceed(text: str | bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """False when JSON *text* certainly nests at most *limit* deep (it has no more opening brackets than that).

    A pre-filter: True only means the parsed value must be checked with :func:`exceeds_depth`."""
    if isinstance(text, str):
        return text.count("[") + text.count("{") > limit
    return text.count(b"[") + text.count(b"{") > limit
