"""The agent loop: ``ReactLoopAgent``, its ``Inbox`` and the driver. The only package with loop logic.

Read ``README.md`` beside this file for what is deliberately *not* here.
"""

from dsh.loop._agent import ReactLoopAgent
from dsh.loop._inbox import Inbox, InboxMessage
from dsh.loop._plugin import AgentLoop, AgentLoopConfig, ConfiguredAgent, agent_loop_plugin
from dsh.loop._state import AgentDisposedError

__all__ = [
    "AgentDisposedError",
    "AgentLoop",
    "AgentLoopConfig",
    "ConfiguredAgent",
    "Inbox",
    "InboxMessage",
    "ReactLoopAgent",
    "agent_loop_plugin",
]
