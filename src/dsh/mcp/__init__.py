"""MCP servers as session-scoped dsh tools (issue #14, ``rfcs/0015-mcp.md``).

Importing this package imports neither the MCP SDK nor anything heavy: the SDK is loaded (in a worker thread)
the first time a session has a server.
"""

from dsh.mcp._config import DEFAULT_TIMEOUT, McpServerConfig, ServerSpec
from dsh.mcp._manager import McpManager, McpOptions, mcp_plugin
from dsh.mcp._names import tool_name

__all__ = ["DEFAULT_TIMEOUT", "McpManager", "McpOptions", "McpServerConfig", "ServerSpec", "mcp_plugin", "tool_name"]
