"""The chat's options, and the agent command and environment they make."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from dsh.chat._agent import dsh_agent_command, parse_agent_command

__all__ = ["ChatOptions"]


@dataclass(frozen=True)
class ChatOptions:
    agent: str | None = None
    """Another ACP agent's command line; None runs ``dsh acp``."""
    resume: bool = False
    model: str | None = None
    data_dir: str | None = None
    config: str | None = None
    yes: bool = False
    """Piped mode: allow every permission request once (the default rejects them: nobody is there to ask)."""
    trace: str | None = None
    """Append every frame, both ways, to this file (``> `` sent, ``< `` received)."""
    cwd: str | None = None
    trust_agent: bool = False
    """``--trust-agent``: serve another agent's file reads and writes outside the cwd and its commands without
    asking (the default asks; dsh's own agent is never asked about)."""

    @property
    def careful(self) -> bool:
        """Whether the client asks before serving the agent's outside file access and commands (issue 34)."""
        return self.agent is not None and not self.trust_agent

    def working_directory(self) -> str:
        return os.path.abspath(self.cwd or os.getcwd())

    def agent_argv(self) -> list[str]:
        return parse_agent_command(self.agent) if self.agent is not None else dsh_agent_command()

    def agent_environment(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The agent's environment: ours, plus ``DSH_MODEL``, ``DSH_DATA_DIR`` and ``DSH_CONFIG`` from the
        options when the agent is dsh (variables, not flags: ``dsh acp`` without flags starts on its fast path).
        Another agent gets our environment unchanged."""
        env = dict(os.environ if base is None else base)
        if self.agent is None:
            settings = {"DSH_MODEL": self.model, "DSH_DATA_DIR": self.data_dir, "DSH_CONFIG": self.config}
            env.update({name: value for name, value in settings.items() if value is not None})
        return env
