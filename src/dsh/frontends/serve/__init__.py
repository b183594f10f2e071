"""``dsh serve`` and ``dsh bridge``: ACP over WebSocket, for an agent on another machine (RFC 0038)."""

from dsh.frontends.serve._bridge import run_bridge
from dsh.frontends.serve._exec import RemoteExec, run_remote_exec
from dsh.frontends.serve._run import run_serve
from dsh.frontends.serve._server import ServeOptions

__all__ = [
    "RemoteExec",
    "ServeOptions",
    "run_bridge",
    "run_remote_exec",
    "run_serve",
]
