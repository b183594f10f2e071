"""Time bounds for tests on a shared, loaded machine (issue #41 item 6; AGENTS.md "tests hold under load").

* :data:`HANG` bounds a wait that must end: hang detection, never a latency promise.
* :func:`promised` is the bound a *dedicated* latency test holds a promise of *seconds* to: five times the
  promise and at least 3 s, so a two-core machine kept busy by another job does not fail it while the failure
  each such test guards against (waiting for a timeout, a grace period, a long reply or a hang: seconds to
  minutes) still does. The promises themselves are measured by ``scripts/bench_*`` on a quiet machine.
"""

from __future__ import annotations

__all__ = ["EXIT_DEADLINE", "HANG", "promised"]

HANG = 60.0
"""Seconds a wait that must end may take before the test calls it a hang."""

EXIT_DEADLINE = 30.0
"""Seconds a daemon is given to exit after stdin EOF in the shared fixtures (hang detection: the exit-time
promise is the dedicated test ``tests/acp/test_raw_protocol.py::test_stdin_eof_exits_0_within_2_seconds``)."""


def promised(seconds: float) -> float:
    """The generous bound of a dedicated test of a *seconds* latency promise (see the module docstring)."""
    return max(5.0 * seconds, 3.0)
