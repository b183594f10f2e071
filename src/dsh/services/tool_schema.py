"""Compact JSON Schemas for tool arguments: what the model reads in every request, without pydantic's noise.

:func:`compact_schema` turns a pydantic ``model_json_schema()`` into the schema sent to providers: no
``title`` keys (the property name says it), ``additionalProperties: false`` on every object (the model learns
that unknown keys are not taken), and an optional field as its plain type instead of ``anyOf [type, null]``
with ``default: null`` (the model omits it; validation still takes an explicit null). Every tool request
carries these schemas, so the savings are paid back on every step; the result is deterministic, so the
prompt stays byte-identical from step to step.
"""

from __future__ import annotations

from typing import Any

__all__ = ["compact_schema"]


def _compact(node: Any, *, properties: bool = False) -> Any:
    if isinstance(node, list):
        return [_compact(item) for item in node]
    if not isinstance(node, dict):
        return node
    if properties:  # the keys are property names, never schema keywords
        return {name: _compact(value) for name, value in node.items()}
    out: dict[str, Any] = {}
    any_of = node.get("anyOf")
    if isinstance(any_of, list) and len(any_of) == 2 and {"type": "null"} in any_of:
        (kept,) = [option for option in any_of if option != {"type": "null"}]
        merged = {key: value for key, value in node.items() if key != "anyOf"}
        if merged.get("default", 0) is None:
            del merged["default"]
        merged.update(kept)
        node = merged
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in ("properties", "$defs", "definitions", "patternProperties"):
            out[key] = _compact(value, properties=True)
        else:
            out[key] = _compact(value)
    if out.get("type") == "object" and "properties" in out:
        out.setdefault("additionalProperties", False)
    return out


def _inline(node: Any, defs: dict[str, Any], depth: int = 0) -> Any:
    """*node* with ``{"$ref": "#/$defs/Name"}`` replaced by the definition (siblings such as a description
    kept); a reference nested too deep (a recursive model) is left as it is."""
    if isinstance(node, list):
        return [_inline(item, defs, depth) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and ref[8:] in defs and depth < 8:
        merged = {**_inline(defs[ref[8:]], defs, depth + 1), **{k: v for k, v in node.items() if k != "$ref"}}
        return merged
    return {key: _inline(value, defs, depth) for key, value in node.items()}


def _has_ref(node: Any) -> bool:
    if isinstance(node, dict):
        return "$ref" in node or any(_has_ref(value) for value in node.values())
    if isinstance(node, list):
        return any(_has_ref(item) for item in node)
    return False


def compact_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """*schema* compacted as the module docstring says (a new dict; the argument is not changed); references
    to ``$defs`` (a nested pydantic model) are inlined, so the model reads each field where it is used."""
    result: dict[str, Any] = _compact(schema)
    defs = result.pop("$defs", None)
    if isinstance(defs, dict):
        body = {key: value for key, value in result.items()}
        inlined: dict[str, Any] = _inline(body, defs)
        if _has_ref(inlined):  # recursive: keep the definitions it still needs
            inlined["$defs"] = defs
        result = inlined
    return result
