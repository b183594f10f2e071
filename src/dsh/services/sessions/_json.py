"""Lossless JSON: validate and copy in one walk.

Session data must survive a round trip through JSON unchanged, or a resumed session would differ from the live
one. So only ``dict`` with ``str`` keys, ``list`` (tuples become lists), ``str``, ``int``, finite ``float``,
``bool`` and ``None`` are accepted; ``NaN`` and the infinities are rejected (JSON cannot spell them), as are
non-string keys and any other type. The copy means later mutation of the caller's object cannot change the log.
"""

from __future__ import annotations

import json
import math
from typing import Any

from dsh._jsonlimits import MAX_LOG_DEPTH

__all__ = ["STRICT_DECODER", "NotJsonError", "copy_json", "parse_json"]


class NotJsonError(ValueError):
    """The value is not lossless JSON; the message names the path to the offending part."""


def copy_json(value: Any, path: str = "$", _depth: int = 0) -> Any:
    """Return a deep copy of *value* after checking that it is lossless JSON nested at most
    :data:`~dsh._jsonlimits.MAX_LOG_DEPTH` deep (deeper data could be logged but not written or loaded)."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is dict:
        if _depth >= MAX_LOG_DEPTH:
            raise NotJsonError(f"{path}: nested deeper than {MAX_LOG_DEPTH} levels")
        out: dict[str, Any] = {}
        below = _depth + 1
        for key, item in value.items():
            if type(key) is not str:
                raise NotJsonError(f"{path}: key {key!r} is not a string")
            out[key] = copy_json(item, f"{path}.{key}", below)
        return out
    if kind is list or kind is tuple:
        if _depth >= MAX_LOG_DEPTH:
            raise NotJsonError(f"{path}: nested deeper than {MAX_LOG_DEPTH} levels")
        below = _depth + 1
        return [copy_json(item, f"{path}[{index}]", below) for index, item in enumerate(value)]
    if kind is float:
        if not math.isfinite(value):
            raise NotJsonError(f"{path}: {value!r} has no JSON spelling")
        return value
    raise NotJsonError(f"{path}: {kind.__name__} is not a JSON type")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} does not fit a finite number")
    return value


STRICT_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)
"""A decoder that yields lossless JSON only (see :func:`parse_json`); ``raw_decode`` parses in place."""


def parse_json(text: str | bytes) -> Any:
    """``json.loads`` that yields lossless JSON only: ``NaN``, ``Infinity`` and overflowing numbers raise
    ``ValueError`` instead of becoming floats no JSON encoder may write."""
    if isinstance(text, bytes):
        text = text.decode()
    return STRICT_DECODER.decode(text)
