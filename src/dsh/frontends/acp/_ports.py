"""What the desks (commands, gate, MCP, pickers, questions, delegation) need from the ACP front end: a narrow
protocol, so that they never import the front end's module and the package has no import circle."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from dsh.frontends.acp._features import ClientFeatures
    from dsh.frontends.acp._pickers import Pickers
    from dsh.frontends.acp._rpc import Connection
    from dsh.frontends.acp._session import AcpSession
    from dsh.frontends.acp._subagents import ChildSessions
    from dsh.notices import Notice

__all__ = ["FrontendPort"]


class FrontendPort(Protocol):
    """What the desks need from the front end, and nothing more."""

    connection: Connection
    client_capabilities: dict[str, Any]
    pickers: Pickers
    features: ClientFeatures
    children: ChildSessions

    @property
    def mcp(self) -> Any: ...

    def session_record(self, session_id: str) -> AcpSession | None: ...

    def owns(self, session_id: str) -> bool: ...

    def tool_update(self, session_id: str, update: dict[str, Any]) -> None: ...

    def post_notice(self, notice: Notice) -> None: ...
