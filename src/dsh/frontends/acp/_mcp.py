"""The ACP front end's hooks into the MCP plugin (:mod:`dsh.mcp`): what ``initialize`` advertises, handing the
``mcpServers`` of ``session/new`` / ``load`` / ``resume`` over, closing a session's servers, and showing a server
that is not available as a notice (:mod:`dsh.notices`): a ``notice`` update for clients that show them, one
failed tool card for any other (so every client shows it, once).

With no ``mcp`` plugin loaded, ``mcpCapabilities`` says no transport works and the hooks do nothing.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dsh.frontends.acp._ports import FrontendPort
    from dsh.frontends.acp._session import AcpSession

__all__ = ["close_mcp", "mcp_capabilities", "open_mcp"]

_cards = itertools.count(1)


def mcp_capabilities(frontend: FrontendPort) -> dict[str, bool]:
    manager = frontend.mcp
    return dict(manager.transports) if manager is not None else {"http": False, "sse": False}


def open_mcp(frontend: FrontendPort, record: AcpSession) -> None:
    """Start the session's servers in the background, once the answer to new/load/resume is out (so not even
    the SDK import of the first server competes with it)."""
    manager = frontend.mcp
    if manager is None:
        return
    session_id = record.id

    def report(server: str, message: str) -> None:  # a notice; as a failed tool card for clients without them
        from dsh.notices import Notice

        key = f"mcp-server-{next(_cards)}"
        frontend.post_notice(Notice(session_id, "error", message, source="mcp", fallback="card", key=key))

    frontend.connection.after_response(
        lambda: manager.open(session_id, record.mcp_servers, cwd=record.cwd, report=report)
    )


async def close_mcp(frontend: FrontendPort, session_id: str, reason: str) -> None:
    """Close the session's servers; at daemon exit (*reason* ``shutdown``) without waiting for them to notice."""
    manager = frontend.mcp
    if manager is not None:
        await manager.close(session_id, hurry=reason == "shutdown")
