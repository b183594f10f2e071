"""Sub-agents: the ``task`` tool and the child agents it runs (see ``README.md`` and RFC 0025)."""

from dsh.subagents._plugin import SubagentsConfig, subagents_plugin

__all__ = [
    "SubagentsConfig",
    "subagents_plugin",
]
