"""The ACP front end: ``dsh acp`` speaks the Agent Client Protocol (v1) over stdio.

Layers, each in its own module: the process's stdio (newline framing is :mod:`dsh.jsonrpc`'s), JSON-RPC (classification,
responses, our own requests), the jsonrpcserver adapter, the projection of session events to
``session/update``, and the front end that maps ACP sessions onto agents. See ``rfcs/0003-acp-front-end.md``.
"""

from typing import TYPE_CHECKING, Any

from dsh.frontends.acp._daemon import DaemonOptions, FrameSource, run, serve_client
from dsh.frontends.acp._terminal import note_if_terminal

if TYPE_CHECKING:  # imported when first used (below): the boot path imports neither (tests/acp/test_startup.py)
    from dsh.frontends.acp._stdio import Backlog

__all__ = [
    "Backlog",
    "DaemonOptions",
    "FrameSource",
    "note_if_terminal",
    "run",
    "serve_client",
    "show_system_prompt",
]


def __getattr__(name: str) -> Any:
    """``show_system_prompt`` (``dsh config show --system-prompt``) and a type, imported when first used: the
    daemon answers ``initialize`` before the rest of the application is imported (RFC 0008)."""
    if name == "show_system_prompt":
        from dsh.frontends.acp import _preview

        return getattr(_preview, name)
    if name == "Backlog":
        from dsh.frontends.acp._stdio import Backlog

        return Backlog
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
