"""Lossless JSON: validate and copy in one walk; encode with orjson under the same rules; frozen containers.

Session data must survive a round trip through JSON unchanged, or a resumed session would differ from the live
one. So only ``dict`` with ``str`` keys, ``list`` (tuples become lists), ``str``, ``int``, finite ``float``,
``bool`` and ``None`` are accepted; ``NaN`` and the infinities are rejected (JSON cannot spell them), as are
non-string keys and any other type. The copy means later mutation of the caller's object cannot change the log.

:class:`FrozenDict` and :class:`FrozenList` are the read-only containers of shared derived data (model messages
derived once from the log and handed to every request): they are JSON values to every encoder and to
:func:`copy_json` (which copies them into plain, mutable containers), and every mutating method raises
``TypeError``, so no holder of a shared value can change it for the others.
"""

from __future__ import annotations

import json
import math
from json.encoder import encode_basestring_ascii as _encode_ascii
from typing import Any, NoReturn

import orjson

from dsh._jsonlimits import MAX_LOG_DEPTH

__all__ = [
    "STRICT_DECODER",
    "FrozenDict",
    "FrozenList",
    "NotJsonError",
    "copy_json",
    "dumps_json",
    "freeze_json",
    "parse_json",
]


class NotJsonError(ValueError):
    """The value is not lossless JSON; the message names the path to the offending part."""


def _read_only(self: object, *args: object, **kwargs: object) -> NoReturn:
    raise TypeError(f"{type(self).__name__} is shared and read-only: build a new value instead of changing it")


class FrozenDict(dict[str, Any]):
    """A ``dict`` whose mutating methods raise ``TypeError`` (see the module docstring)."""

    __slots__ = ()
    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _read_only

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return copy_json(self)

    def __reduce__(self) -> Any:
        return (dict, (dict(self),))


class FrozenList(list[Any]):
    """A ``list`` whose mutating methods raise ``TypeError`` (see the module docstring)."""

    __slots__ = ()
    __setitem__ = __delitem__ = append = extend = insert = pop = remove = clear = _read_only
    sort = reverse = __iadd__ = __imul__ = _read_only

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return copy_json(self)

    def __reduce__(self) -> Any:
        return (list, (list(self),))


class _Rejected(Exception):
    """Internal: the fast walk met something that is not lossless JSON; the slow walk says where."""


def _copy(value: Any, depth: int = 0) -> Any:
    # The hot walk (every append goes through it): no path strings, no error text. Only the failure path
    # (:func:`_locate`) pays for naming where the problem is. *depth*: containers above *value*.
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is dict or issubclass(kind, FrozenDict):
        if depth >= MAX_LOG_DEPTH:
            raise _Rejected
        below = depth + 1
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _Rejected
            kind = type(item)
            out[key] = item if kind is str or kind is int or kind is bool or item is None else _copy(item, below)
        return out
    if kind is list or kind is tuple or kind is FrozenList:
        if depth >= MAX_LOG_DEPTH:
            raise _Rejected
        below = depth + 1
        return [_copy(item, below) for item in value]
    if kind is float and math.isfinite(value):
        return value
    raise _Rejected


def _locate(value: Any, path: str, depth: int = 0) -> None:
    """Raise :class:`NotJsonError` naming the first part of *value* (at *path*) that is not lossless JSON, or
    the first container nested deeper than :data:`~dsh._jsonlimits.MAX_LOG_DEPTH`."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return
    is_dict = kind is dict or issubclass(kind, FrozenDict)
    if (is_dict or kind is list or kind is tuple or kind is FrozenList) and depth >= MAX_LOG_DEPTH:
        raise NotJsonError(f"{path}: nested deeper than {MAX_LOG_DEPTH} levels")
    if is_dict:
        for key, item in value.items():
            if type(key) is not str:
                raise NotJsonError(f"{path}: key {key!r} is not a string")
            _locate(item, f"{path}.{key}", depth + 1)
        return
    if kind is list or kind is tuple or kind is FrozenList:
        for index, item in enumerate(value):
            _locate(item, f"{path}[{index}]", depth + 1)
        return
    if kind is float:
        if not math.isfinite(value):
            raise NotJsonError(f"{path}: {value!r} has no JSON spelling")
        return
    raise NotJsonError(f"{path}: {kind.__name__} is not a JSON type")


def copy_json(value: Any, path: str = "$") -> Any:
    """Return a deep copy of *value* (plain containers) after checking that it is lossless JSON nested at most
    :data:`~dsh._jsonlimits.MAX_LOG_DEPTH` deep (deeper data could be logged but not written or loaded).

    *path* names *value* in the error message; it costs nothing unless *value* is rejected."""
    try:
        return _copy(value)
    except _Rejected:
        pass
    _locate(value, path)
    raise NotJsonError(f"{path}: not lossless JSON")  # pragma: no cover - _locate always finds the culprit


def freeze_json(value: Any) -> Any:
    """A read-only deep copy of lossless JSON *value* (:class:`FrozenDict` / :class:`FrozenList` containers).

    *value* must already be lossless JSON (it is not checked again); frozen parts are shared, not copied."""
    kind = type(value)
    if kind is dict:
        return FrozenDict({key: freeze_json(item) for key, item in value.items()})
    if kind is list or kind is tuple:
        return FrozenList([freeze_json(item) for item in value])
    return value


_STDLIB_DUMPS = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


def dumps_json(value: Any) -> bytes:
    """Compact UTF-8 JSON of *value*, which must be lossless JSON (else :class:`NotJsonError`, naming where).

    orjson does the encoding; it would write ``NaN`` and the infinities as ``null`` and refuses what the
    standard library would silently change (non-string keys), so: an orjson refusal is checked again with
    :func:`copy_json`'s rules (the error names the culprit) and what passes — lone surrogates, integers beyond
    64 bits — is written by the standard encoder, ASCII-escaped, which spells both exactly; and an output that
    holds ``null`` is checked for a non-finite number before it is returned.
    """
    try:
        out = orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError: a non-str key, a surrogate, a big int, an unknown type, depth
        _locate(value, "$")
        return _STDLIB_DUMPS(value).encode()
    if b"null" in out:
        _locate(value, "$")
    return out


def json_string(text: str) -> bytes:
    """The JSON string literal of *text*, quotes included: what :func:`dumps_json` writes for it.

    One encoding of a streamed chunk's text serves both the session file's line and the ``session/update``
    frame (the chunk path). A lone surrogate, which orjson refuses, is spelt with the standard encoder's ASCII
    escapes, exactly.

    The result is a right-sized copy of orjson's: the object ``orjson.dumps`` returns keeps the whole buffer it
    was written in (about 4 KiB, whatever its length), so holding one per chunk (a live session's unreleased
    chunks, a loaded session's million) would cost 4 KiB each instead of ~40 bytes (measured: 393 MB RSS for
    100k small texts, 3 MB for the copies; ``tests/test_sessions.py``)."""
    try:
        return b"%s" % orjson.dumps(text)
    except TypeError:
        return _encode_ascii(text).encode()


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
