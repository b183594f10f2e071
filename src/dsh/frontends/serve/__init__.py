"""``dsh serve`` and ``dsh bridge``: ACP over WebSocket, for an agent on another machine (RFC 0038)."""

from dsh.frontends.serve._bridge import bridge, run_bridge
from dsh.frontends.serve._exec import RemoteExec, run_remote_exec
from dsh.frontends.serve._run import run_serve
from dsh.frontends.serve._server import ServeOptions, is_loopback, serve
from dsh.frontends.serve._token import ENV_TOKEN, client_token, default_token_file, server_token, token_matches

__all__ = [
    "ENV_TOKEN",
    "RemoteExec",
    "ServeOptions",
    "bridge",
    "client_token",
    "default_token_file",
    "is_loopback",
    "run_bridge",
    "run_remote_exec",
    "run_serve",
    "serve",
    "server_token",
    "token_matches",
]
