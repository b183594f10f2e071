"""Every process dsh starts for a session (commands, MCP servers) and everything *they* start ends with the
session and with the daemon, including what escaped its process group (``setsid``, a double fork).

* The daemon calls :func:`become_subreaper` once at start-up (``PR_SET_CHILD_SUBREAPER``): an orphaned
  descendant is re-parented to the daemon instead of to init, so it stays in the daemon's process tree.
* Processes are *tagged* with the session they belong to: :meth:`SessionTags.tagged` marks the running task (a
  context variable) and :func:`tag_environment` is what :func:`dsh.secrets.child_environment` adds to a child's
  environment (``DSH_SESSION_TAG``), which its own children inherit. A :class:`SessionTags` (the ``reaper``
  service; an MCP manager has its own) remembers which tags it handed out, so ending a session that started
  nothing costs no ``/proc`` scan.
* :meth:`SessionTags.end` and :func:`end_tagged` end the daemon's descendants carrying a tag;
  :func:`end_descendants` ends all of them. The ``reaper`` plugin sets the tag around every tool call and ends a
  session's processes when its agent is
  disposed, and ends every descendant when it is disposed itself (daemon exit) — the latter only in a process
  that called :func:`become_subreaper`, so an application built inside a test runner never signals the
  runner's other children.

* After the daemon itself is gone (``kill -9`` included), its **watchdog** ends the rest
  (:func:`arm_watchdog`, started with the first child; :mod:`._watchdog`): a small process in its own session
  that holds the read end of a pipe from the daemon and, when the pipe closes, kills every process whose
  environment carries the daemon's token (``DSH_DAEMON_TAGS``), wherever it was re-parented.

Linux only (``/proc``, ``prctl``); elsewhere the functions do nothing and say so.
"""

from dsh.reaper._plugin import reaper_plugin
from dsh.reaper._proc import SessionTags, become_subreaper, tag_environment

__all__ = [
    "SessionTags",
    "become_subreaper",
    "reaper_plugin",
    "tag_environment",
]
