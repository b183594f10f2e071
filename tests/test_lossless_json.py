"""``copy_json`` accepts exactly the values that survive a JSON round trip unchanged."""

from __future__ import annotations

import enum
import json
import math
from collections import OrderedDict
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh.services.sessions import NotJsonError, copy_json

_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()

json_values = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(), children, max_size=5),
    max_leaves=30,
)


def _same(a: Any, b: Any) -> bool:
    """Structural equality that also tells ``1`` from ``1.0`` and ``True`` from ``1``."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    return bool(a == b)


def _containers(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [value, *(c for v in value.values() for c in _containers(v))]
    if isinstance(value, list):
        return [value, *(c for v in value for c in _containers(v))]
    return []


@given(json_values)
def test_copy_json_accepts_json_values_and_the_copy_round_trips(value: Any) -> None:
    copied = copy_json(value)
    assert _same(copied, value)
    assert _same(json.loads(json.dumps(copied, allow_nan=False)), copied)


@given(json_values)
def test_copy_json_shares_no_container_with_the_original(value: Any) -> None:
    copied = copy_json(value)
    original_ids = {id(c) for c in _containers(value)}
    assert not any(id(c) in original_ids for c in _containers(copied))


@given(st.recursive(_scalars, lambda children: st.tuples(children, children) | st.lists(children, max_size=3)))
def test_tuples_become_lists(value: Any) -> None:
    copied = copy_json(value)
    assert "tuple" not in repr(type(copied))
    assert _same(json.loads(json.dumps(copied)), copied)


_poison = st.sampled_from(
    [
        math.nan,
        math.inf,
        -math.inf,
        {1, 2},
        frozenset(),
        b"bytes",
        bytearray(b"x"),
        object(),
        1j,
        OrderedDict(),  # a dict subclass is not a plain dict
        {1: "int key"},
        {(1, 2): "tuple key"},
        {None: "none key"},
        {b"k": "bytes key"},
    ]
)


def _insert(value: Any, poison: Any, where: int) -> Any:
    """Put *poison* deep inside a container that also holds the valid *value*."""
    if where == 0:
        return {"a": [value, {"b": poison}]}
    return [value, [poison]]


@given(json_values, _poison, st.integers(0, 1))
def test_copy_json_rejects_values_that_contain_non_json(value: Any, poison: Any, where: int) -> None:
    with pytest.raises(NotJsonError):
        copy_json(_insert(value, poison, where))


@given(json_values, _poison)
def test_copy_json_rejects_non_json_at_the_top_level_or_as_a_dict_value(value: Any, poison: Any) -> None:
    with pytest.raises(NotJsonError):
        copy_json(poison)
    with pytest.raises(NotJsonError):
        copy_json({"ok": value, "bad": poison})


class _Color(enum.IntEnum):
    RED = 1


class _MyStr(str):
    pass


class _MyFloat(float):
    pass


@pytest.mark.parametrize("value", [_Color.RED, _MyStr("x"), _MyFloat(1.0), {_MyStr("k"): 1}])
def test_copy_json_rejects_subclasses_of_json_types(value: Any) -> None:
    with pytest.raises(NotJsonError):
        copy_json(value)


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({"a": [0, {"b": math.nan}]}, r"\$\.a\[1\]\.b"),
        ([{1: 2}], r"\$\[0\]"),
        ({"s": {1}}, r"\$\.s: set"),
    ],
)
def test_error_message_names_the_path(value: Any, path: str) -> None:
    with pytest.raises(NotJsonError, match=path):
        copy_json(value)
