"""Sub-agents: the ``task`` tool and the child agents it runs (see ``README.md`` and RFC 0025)."""

from dsh.subagents._files import agent_types, parse_agent_file
from dsh.subagents._plugin import (
    END_EVENT,
    MIRROR_EVENT,
    PROGRESS_EVENT,
    START_EVENT,
    TASK_TOOL,
    Child,
    Subagents,
    SubagentsConfig,
    subagents_plugin,
)
from dsh.subagents._types import BUILTIN_TYPES, DEFAULT_TYPE, READ_ONLY_TOOLS, AgentType

__all__ = [
    "END_EVENT",
    "MIRROR_EVENT",
    "START_EVENT",
    "BUILTIN_TYPES",
    "DEFAULT_TYPE",
    "PROGRESS_EVENT",
    "READ_ONLY_TOOLS",
    "TASK_TOOL",
    "AgentType",
    "Child",
    "Subagents",
    "SubagentsConfig",
    "agent_types",
    "parse_agent_file",
    "subagents_plugin",
]
