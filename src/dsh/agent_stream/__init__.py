"""The loop's ``agent/*`` events on the wire, for ACP clients that ask: ``_dsh/agent/*`` extension notifications.

See :mod:`dsh.agent_stream._plugin` for the guarantees and :data:`SCHEMA` for every notification's fields.
"""

from __future__ import annotations

from dsh.agent_stream._plugin import META_KEY, AgentStream, agent_stream_plugin
from dsh.agent_stream._wire import SCHEMA

__all__ = [
    "META_KEY",
    "SCHEMA",
    "AgentStream",
    "agent_stream_plugin",
]

ENV_VARIABLE = "DSH_AGENT_EVENTS"
"""``DSH_AGENT_EVENTS=1`` (or ``--agent-events``) turns the stream on for every client."""
