"""``dsh acp``: the long-running daemon an editor spawns. Owns the process's stdio and its lifetime.

Order of operations, and why:

1. Claim stdout before anything else runs, so nothing but frames can ever reach fd 1.
2. Build the application (core plugins + the ACP front end) and start the single frame writer.
3. Read stdin in a daemon thread, frame it, hand each frame to the connection (requests become tasks).
4. On stdin EOF or SIGTERM/SIGINT: stop reading, cancel every turn, answer pending prompts ``cancelled``,
   dispose every agent (closing ``turn/end``\\ s are flushed), drain the writer, exit 0 — bounded so the whole
   shutdown takes well under 2 s.
"""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc

from dsh._log import configure_logging, get_logger

__all__ = ["DaemonOptions", "run"]

SHUTDOWN_GRACE = 1.5
WRITER_GRACE = 0.3
log = get_logger("dsh.acp")


@dataclass(frozen=True)
class DaemonOptions:
    """The daemon's settings; :meth:`resolve` is the one place that reads their environment variables."""

    model: str = "echo"
    system_prompt: str | None = None
    log_level: str = "warning"
    log_file: str | None = None
    data_dir: str | None = None
    """Where sessions are stored (``--data-dir``, ``DSH_DATA_DIR``, else the XDG data directory)."""
    plugins: tuple[str, ...] = ()
    """Extra plugins as ``module:attribute`` import paths (``DSH_PLUGINS``, comma-separated)."""

    @classmethod
    def resolve(
        cls,
        *,
        model: str | None = None,
        system_prompt: str | None = None,
        log_level: str | None = None,
        log_file: str | None = None,
        data_dir: str | None = None,
    ) -> DaemonOptions:
        """Explicit values win; then ``DSH_MODEL``, ``DSH_LOG_LEVEL``, ``DSH_LOG_FILE``; then the defaults."""
        env = os.environ
        return cls(
            model=model or env.get("DSH_MODEL") or cls.model,
            system_prompt=system_prompt,
            log_level=log_level or env.get("DSH_LOG_LEVEL") or cls.log_level,
            log_file=log_file or env.get("DSH_LOG_FILE") or None,
            data_dir=data_dir or env.get("DSH_DATA_DIR") or None,
            plugins=tuple(p.strip() for p in env.get("DSH_PLUGINS", "").split(",") if p.strip()),
        )


def run(options: DaemonOptions) -> int:
    """Run the daemon until the editor hangs up; return the process exit code."""
    from dsh.frontends.acp._stdio import claim_stdout

    if os.isatty(0):
        sys.stderr.write("dsh acp: waiting for ACP messages on stdin (editors spawn this command; Ctrl-D quits)\n")
    protocol_fd = claim_stdout()
    plugins = [_import_plugin(path) for path in options.plugins]  # after the claim: imports may print
    log_stream = open(options.log_file, "a", buffering=1, encoding="utf-8") if options.log_file else None  # noqa: SIM115
    configure_logging(options.log_level, log_stream)
    try:
        return anyio.run(_serve, protocol_fd, options, plugins)
    except KeyboardInterrupt:
        return 0
    finally:
        if log_stream is not None:
            log_stream.close()


def _import_plugin(path: str) -> Any:
    """Load ``module:attribute``; a bad path is an error that names it (the daemon must not start half-made)."""
    import importlib

    module_name, _, attribute = path.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attribute or "plugin")
    except (ImportError, AttributeError) as exc:
        raise SystemExit(f"dsh: cannot load plugin {path!r}: {exc}") from None


async def _watch_signals(stop: anyio.Event) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for _ in signals:
            stop.set()
            return


async def _serve(protocol_fd: int, options: DaemonOptions, plugins: list[Any]) -> int:
    from dsh.app import load_core
    from dsh.frontends.acp._framing import LineFramer
    from dsh.frontends.acp._frontend import AcpFrontend, AcpOptions, acp_plugin
    from dsh.frontends.acp._stdio import FrameWriter, StdinReader
    from dsh.kernel import App

    writer = FrameWriter(protocol_fd)
    stop = anyio.Event()
    async with anyio.create_task_group() as root:
        root.start_soon(writer.run, name="acp-writer")
        async with App() as app:
            ctx = app.ctx
            from dsh.plugins.persistence import default_data_dir

            load_core(ctx, data_dir=options.data_dir or default_data_dir())
            for extra in plugins:
                ctx.plugin(extra)
            ctx.plugin(acp_plugin, AcpOptions(writer.send, model=options.model, system_prompt=options.system_prompt))
            frontend: AcpFrontend = ctx.acp
            connection = frontend.connection
            reader = StdinReader(0)
            reader.start()

            async with anyio.create_task_group() as handlers:

                async def read() -> None:
                    framer = LineFramer()
                    async for chunk in reader:
                        for frame in framer.feed(chunk):
                            await connection.receive(frame, handlers)
                    for frame in framer.close():
                        await connection.receive(frame, handlers)
                    stop.set()

                handlers.start_soon(read, name="acp-reader")
                handlers.start_soon(_watch_signals, stop, name="acp-signals")
                await stop.wait()
                log.info("shutting down")
                with anyio.move_on_after(SHUTDOWN_GRACE, shield=True):
                    await frontend.shutdown()
                handlers.cancel_scope.cancel()
            connection.close()
        writer.close()
        with anyio.move_on_after(WRITER_GRACE, shield=True):
            await writer.drained()
        root.cancel_scope.cancel()
    sys.stderr.flush()
    return 0
