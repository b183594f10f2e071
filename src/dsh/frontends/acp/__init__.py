"""The ACP front end: ``dsh acp`` speaks the Agent Client Protocol (v1) over stdio.

Layers, each in its own module: newline framing (sans-IO), the process's stdio, JSON-RPC (classification,
responses, our own requests), the jsonrpcserver adapter, the projection of session events to
``session/update``, and the front end that maps ACP sessions onto agents. See ``rfcs/0003-acp-front-end.md``.
"""

from dsh.frontends.acp._daemon import DaemonOptions, run

__all__ = ["DaemonOptions", "run"]
