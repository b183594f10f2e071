"""compact_schema: no titles, closed objects, optional fields as their plain type, nested models inlined; a field
named like a keyword (``title``) is kept; the result is deterministic."""

from __future__ import annotations

from pydantic import BaseModel, Field

from dsh.services.tool_schema import compact_schema


class Inner(BaseModel):
    name: str = Field(description="A name.")
    weight: float | None = None


class Outer(BaseModel):
    title: str = Field(description="A property called title.")
    limit: int | None = Field(default=None, ge=1, description="Optional.")
    items: list[Inner] | None = None
    flag: bool = False


def test_compact_schema() -> None:
    schema = compact_schema(Outer.model_json_schema())
    assert schema == {
        "type": "object",
        "properties": {
            "title": {"type": "string", "description": "A property called title."},
            "limit": {"type": "integer", "minimum": 1, "description": "Optional."},
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"name": {"type": "string", "description": "A name."}, "weight": {"type": "number"}},
                    "required": ["name"],
                    "additionalProperties": False,
                },
            },
            "flag": {"type": "boolean", "default": False},
        },
        "required": ["title"],
        "additionalProperties": False,
    }
    assert compact_schema(Outer.model_json_schema()) == schema
