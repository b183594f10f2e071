"""Agent types: what a sub-agent may use and what it is told.

Guarantees: ``explore`` (the default) offers only tools that read (``READ_ONLY_TOOLS``) and ``run_command`` for
read-only commands (:func:`dsh.policy.is_read_only`); ``general`` offers the parent's tools. Neither is ever wider
than the parent: every call still goes through the parent's policy (``Policies.link``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BUILTIN_TYPES", "DEFAULT_TYPE", "READ_ONLY_TOOLS", "REPORT_GUIDANCE", "AgentType"]

READ_ONLY_TOOLS = frozenset({"read_file", "grep", "glob", "list_files"})
"""The tools an ``explore`` child has, besides ``run_command`` limited to read-only commands."""


@dataclass(frozen=True, slots=True)
class AgentType:
    """``tools``: the allow-list (None: the parent's tools); ``read_only_commands``: ``run_command`` is offered
    but only read-only commands run; ``instructions`` go to the child's system prompt; ``model`` overrides the
    parent's."""

    name: str
    description: str
    instructions: str
    tools: frozenset[str] | None = None
    read_only_commands: bool = False
    model: str | None = None

    def allows(self, tool: str) -> bool:
        if self.tools is None:
            return True
        return tool in self.tools or (self.read_only_commands and tool == "run_command")


REPORT_GUIDANCE = (
    "You are a sub-agent started by another agent for one bounded job. Work on your own (nobody answers "
    "questions), then end with a short, complete report: your final message is all the other agent receives."
)

BUILTIN_TYPES: dict[str, AgentType] = {
    "explore": AgentType(
        "explore",
        "Read-only exploration: finds and reads code, searches, runs read-only commands; changes nothing.",
        REPORT_GUIDANCE + " You can only read: you cannot change files or run commands that change anything.",
        tools=READ_ONLY_TOOLS,
        read_only_commands=True,
    ),
    "general": AgentType(
        "general",
        "A general agent with the same tools and permissions as you, for a self-contained multi-step job.",
        REPORT_GUIDANCE,
    ),
}
DEFAULT_TYPE = "explore"
