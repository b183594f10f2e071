"""The process around :func:`serve`: logging, extra plugins, the token, one line per refusal at start-up."""

from __future__ import annotations

import sys
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from dsh.frontends.acp import DaemonOptions
    from dsh.frontends.serve._server import ServeOptions

__all__ = ["run_serve"]


def run_serve(options: ServeOptions, daemon: DaemonOptions, token_file: str | None) -> int:
    """Resolve the token (``DSH_SERVE_TOKEN`` or the 0600 file, made at first start), then serve until a signal."""
    from dsh._log import open_log
    from dsh.frontends.serve._server import is_loopback, serve
    from dsh.frontends.serve._token import TokenError, server_token
    from dsh.settings import exit_on_error, fail

    try:
        token, source = server_token(Path(token_file) if token_file else None)
    except (TokenError, OSError) as exc:
        fail(f"dsh serve: {exc}", 2)
    options = replace(options, token=token)
    if (options.tls_cert is None) != (options.tls_key is None):
        fail("dsh serve: --tls-cert and --tls-key go together", 2)
    sys.stderr.write(f"dsh serve: clients present the bearer token from {source}\n")
    if not is_loopback(options.host) and options.tls_cert is None:
        sys.stderr.write(
            "dsh serve: listening beyond loopback without TLS: the token and the session travel in clear "
            "(use --tls-cert/--tls-key, a TLS reverse proxy, or SSH port forwarding)\n"
        )
    with ExitStack() as stack:
        with exit_on_error():
            stack.enter_context(open_log(daemon.log_level, daemon.log_file))
        plugins = []
        if daemon.plugins:
            from dsh.extra_plugins import import_plugins

            with exit_on_error():
                plugins = import_plugins(daemon.plugins)
        try:
            return anyio.run(serve, options, daemon, plugins)
        except KeyboardInterrupt:
            return 0
        except OSError as exc:  # the address is taken or cannot be bound
            fail(f"dsh serve: cannot listen on {options.host}:{options.port}: {exc.strerror or exc}", 1)
