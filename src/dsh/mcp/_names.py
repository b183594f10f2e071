"""Model-facing names of MCP tools: ``mcp__<server>__<tool>``, only ``[A-Za-z0-9_-]``, at most 64 characters.

Providers reject other characters and longer names. A name that had to be cut keeps a short hash of the full
``(server, tool)`` pair, so two long names that share a prefix stay distinct; :func:`unique_names` resolves the
rare collision that sanitising alone can cause (``a.b`` and ``a_b``) the same way.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

__all__ = ["MAX_NAME", "PREFIX", "tool_name", "unique_names"]

PREFIX = "mcp__"
MAX_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def _digest(server: str, tool: str) -> str:
    return hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:8]


def _with_hash(name: str, server: str, tool: str) -> str:
    return f"{name[: MAX_NAME - 9]}_{_digest(server, tool)}"


def tool_name(server: str, tool: str) -> str:
    """The namespaced, sanitised name of *tool* of *server* (deterministic)."""
    name = f"{PREFIX}{_UNSAFE.sub('_', server)}__{_UNSAFE.sub('_', tool)}"
    return name if len(name) <= MAX_NAME else _with_hash(name, server, tool)


def unique_names(server: str, tools: Iterable[str], taken: Iterable[str] = ()) -> dict[str, str]:
    """``{tool: name}`` for *tools* of *server*, distinct from each other and from *taken*."""
    used = set(taken)
    names: dict[str, str] = {}
    for tool in tools:
        name = tool_name(server, tool)
        if name in used:
            name = _with_hash(name, server, tool)
        used.add(name)
        names[tool] = name
    return names
