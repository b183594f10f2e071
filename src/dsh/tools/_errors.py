"""The errors the built-in tools raise: each becomes an error result (``Error: <message>``, ``error.code``)
whose message tells the model what to do next."""

from __future__ import annotations

from dsh.errors import DshError

__all__ = ["OutsideRootsError", "ToolError"]


class ToolError(DshError):
    """A tool could not do what it was asked; ``code`` says why (``NOT_FOUND``, ``NO_MATCH``, …)."""

    default_code = "TOOL_ERROR"


class OutsideRootsError(ToolError):
    """The path lies outside the session's directory and no gate granted it for this call."""

    default_code = "OUTSIDE_ROOTS"
