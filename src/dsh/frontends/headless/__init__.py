"""``dsh exec``: one task through the real loop for scripts, CI and evaluation harnesses (RFC 0020).

:func:`run_exec` runs it and returns the exit status; with ``json`` stdout carries the agent stream's events as
JSON lines and one result object (:mod:`dsh.frontends.headless._run` states the guarantees). ``dsh prompt`` is an alias.
"""

from dsh.frontends.headless._run import ExecOptions, run_exec

__all__ = [
    "ExecOptions",
    "run_exec",
]
