"""The daemon's application: which plugins ``dsh acp`` loads, in one place, so ``dsh config show --system-prompt``
(:mod:`._preview`) builds exactly what an editor's session runs (front-end tools, MCP servers, extra plugins)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dsh.frontends.acp._daemon import DaemonOptions
    from dsh.frontends.acp._frontend import AcpOptions
    from dsh.kernel import Context

__all__ = ["load_daemon_plugins"]


def load_daemon_plugins(ctx: Context, options: DaemonOptions, plugins: list[Any], acp_options: AcpOptions) -> None:
    """Load, in order: the core plugins with the file's settings, the MCP plugin, the extra plugins
    (``DSH_PLUGINS``), the ACP front end, the agent-event stream."""
    from dsh.agent_stream import agent_stream_plugin
    from dsh.app import load_core
    from dsh.context import context_from_file
    from dsh.frontends.acp._frontend import acp_plugin
    from dsh.mcp import McpOptions, mcp_plugin
    from dsh.plugins.persistence import default_data_dir

    loaded = options.loaded_config
    load_core(
        ctx,
        data_dir=options.data_dir or default_data_dir(),
        agent_loop=options.agent_loop_config(),
        providers=loaded.providers if loaded is not None else None,
        context=context_from_file(loaded),
        secrets=loaded.secrets if loaded is not None else None,
    )
    ctx.plugin(mcp_plugin, McpOptions(loaded.mcp_servers if loaded else {}, options.mcp_timeout))
    for extra in plugins:
        ctx.plugin(extra)
    ctx.plugin(acp_plugin, acp_options)
    ctx.plugin(agent_stream_plugin, {"forced": options.agent_events})
