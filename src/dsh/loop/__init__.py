"""The agent loop: ``ReactLoopAgent``, its ``Inbox`` and the driver. The only package with loop logic.

Read ``README.md`` beside this file for what is deliberately *not* here.
"""

from dsh.loop._plugin import agent_loop_plugin

__all__ = [
    "agent_loop_plugin",
]
