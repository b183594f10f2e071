"""Background commands' results reach the model (issue #38 item 1, RFC 0036).

* :func:`background_plugin`: at the start of every step of a session (``agent/step-start``, before the model's
  request is made), each of the session's background commands that ended since the model last looked is told
  to it in one short ``context/message`` (source ``plugin`` ``background``): its id, its exit, and the tail of
  its output (at most 2,000 characters) fenced as command output. So a command ending mid-turn is
  in the next step's request, and one ending between turns is in the next prompt's first request. Each ending
  is told once; a command the model already saw end (``command_output`` after its exit, ``command_wait``,
  ``command_kill``) is not told again.
* Wake-up (``background: {wake: true}``, off by default): a command that ends while its session is idle starts
  a turn of the session's own (a ``session/notice`` announces it, then the turn streams like any other); never
  while the agent is running or has anything queued, and one turn for one wake (commands ending together share
  it).
* :class:`BackgroundConfig`: the configuration file's ``background`` section.
"""

from dsh.background._plugin import WAKE_TEXT, BackgroundConfig, background_plugin

__all__ = [
    "WAKE_TEXT",
    "BackgroundConfig",
    "background_plugin",
]
