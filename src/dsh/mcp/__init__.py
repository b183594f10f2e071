"""MCP servers as session-scoped dsh tools (issue #14, ``rfcs/0015-mcp.md``; what is not here: ``README.md``).

Importing this package imports nothing (its names load on first access), so ``dsh.cli`` can register
``dsh mcp`` for free; the MCP SDK itself is loaded (in a worker thread) the first time a session has a server.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dsh.mcp._cli import mcp_app
    from dsh.mcp._config import McpServerConfig
    from dsh.mcp._manager import McpManager, McpOptions, mcp_plugin

__all__ = [
    "McpManager",
    "McpOptions",
    "McpServerConfig",
    "mcp_app",
    "mcp_plugin",
]

_HOMES = {
    "McpServerConfig": "_config",
    "McpManager": "_manager",
    "McpOptions": "_manager",
    "mcp_plugin": "_manager",
    "mcp_app": "_cli",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'dsh.mcp' has no attribute {name!r}")
    return getattr(importlib.import_module(f"dsh.mcp.{home}"), name)
