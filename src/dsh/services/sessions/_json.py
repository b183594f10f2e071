"""Lossless JSON: validate and copy in one walk.

Session data must survive a round trip through JSON unchanged, or a resumed session would differ from the live
one. So only ``dict`` with ``str`` keys, ``list`` (tuples become lists), ``str``, ``int``, finite ``float``,
``bool`` and ``None`` are accepted; ``NaN`` and the infinities are rejected (JSON cannot spell them), as are
non-string keys and any other type. The copy means later mutation of the caller's object cannot change the log.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["NotJsonError", "copy_json"]


class NotJsonError(ValueError):
    """The value is not lossless JSON; the message names the path to the offending part."""


def copy_json(value: Any, path: str = "$") -> Any:
    """Return a deep copy of *value* after checking that it is lossless JSON."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is dict:
        out: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                raise NotJsonError(f"{path}: key {key!r} is not a string")
            out[key] = copy_json(item, f"{path}.{key}")
        return out
    if kind is list or kind is tuple:
        return [copy_json(item, f"{path}[{index}]") for index, item in enumerate(value)]
    if kind is float:
        if not math.isfinite(value):
            raise NotJsonError(f"{path}: {value!r} has no JSON spelling")
        return value
    raise NotJsonError(f"{path}: {kind.__name__} is not a JSON type")
