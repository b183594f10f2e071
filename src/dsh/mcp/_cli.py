"""``dsh mcp check``: start every server of the configuration file's ``mcp_servers``, list its tools, report
each failure in one line, then exit (status 1 when any server failed). Registered by one line in ``dsh.cli``.

Output: one line per server on stdout (``ok`` or ``FAIL``), in the file's order; the SDK is imported only when
there is a server to check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from dsh.mcp._config import ServerSpec

__all__ = ["check_servers", "mcp_app"]

mcp_app = typer.Typer(help="MCP servers of the configuration file (mcp_servers): check them.", no_args_is_help=True)


async def check_servers(specs: list[ServerSpec]) -> list[tuple[str, bool]]:
    """Connect every spec at once (each within its timeout); ``[(line, ok)]`` in the given order."""
    import anyio

    from dsh.mcp._server import ServerConnection

    connections: list[ServerConnection] = []

    async def listed(_connection: ServerConnection) -> None:
        return None

    async def check(connection: ServerConnection) -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(connection.run)
            await connection.settled.wait()
            await connection.close()

    async with anyio.create_task_group() as group:
        for spec in specs:
            connection = ServerConnection(spec, cwd=None, on_tools=listed)
            connections.append(connection)
            group.start_soon(check, connection)
    lines: list[tuple[str, bool]] = []
    for connection in connections:
        where = connection.spec.transport
        if connection.failure is None and connection.tools:
            names = ", ".join(tool.name for tool in connection.tools)
            lines.append((f"ok    {connection.name} ({where}): {len(connection.tools)} tools: {names}", True))
        elif connection.failure is None:
            lines.append((f"ok    {connection.name} ({where}): no tools", True))
        else:
            lines.append((f"FAIL  {connection.name} ({where}): {connection.failure}", False))
    return lines


@mcp_app.command("check")
def check(
    config: Annotated[
        str | None,
        typer.Option(
            "--config",
            metavar="PATH",
            help="Configuration file \\[env DSH_CONFIG; default ~/.config/dsh/config.yaml if it exists].",
        ),
    ] = None,
) -> None:
    """Start each configured MCP server, list its tools and report failures (one line each), then exit."""
    import anyio

    from dsh._log import configure_logging
    from dsh.mcp._config import specs_from_config
    from dsh.settings import exit_on_error, resolve_settings

    with exit_on_error():
        settings = resolve_settings(config=config)
    servers = settings.config.mcp_servers if settings.config is not None else {}
    if not servers:
        typer.echo(f"no MCP servers configured ({settings.config_path or 'no configuration file'})")
        return
    configure_logging("error")  # the failures are this command's output; the log would repeat them
    results = anyio.run(check_servers, specs_from_config(servers, settings.get("mcp_timeout")))
    for line, _ok in results:
        typer.echo(line)
    if not all(ok for _line, ok in results):
        raise typer.Exit(1)
