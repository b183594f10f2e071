"""Keep the provider keys out of reach of the commands the model runs, inside the daemon's own process.

A command started by ``run_command`` does not get the keys in its environment (:func:`child_environment`), but it
can read its parent's: ``/proc/$PPID/environ`` shows the environment block the daemon was *started* with, which
the kernel keeps at the top of the daemon's stack whatever Python does to ``os.environ`` later. And a same-user
process can read the daemon's memory (``/proc/PID/mem``, a debugger) unless the daemon is not dumpable.

Guarantees of :func:`seal_process` (Linux; elsewhere it does what the platform allows and says so):

* Every variable the policy withholds has its value overwritten with NUL bytes in the start-up environment
  block (the region ``/proc/self/stat`` names as ``env_start``..``env_end``, the very bytes
  ``/proc/PID/environ`` returns), and is removed from libc's ``environ`` (``unsetenv``), so a child started
  without an explicit ``env`` cannot inherit it either. Python's ``os.environ`` keeps the values: the providers
  and the redaction read them there, in memory only the daemon can read.
* The process is made non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``, as ssh-agent does): no core file, no
  ``ptrace`` attach and no ``/proc/PID/mem`` or ``/proc/PID/environ`` for another process of the same user
  (root, holding ``CAP_SYS_PTRACE``, can still read them: that is what the scrub is for).
* It never raises: what it could not do is returned as text for one log line.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, MutableMapping

from dsh.secrets._policy import SecretPolicy

__all__ = ["seal_and_adopt", "seal_process"]

_PR_SET_DUMPABLE = 4


def _env_region() -> tuple[int, int] | None:
    """``(env_start, env_end)`` of this process, from ``/proc/self/stat`` (fields 50 and 51, Linux ≥ 3.5)."""
    try:
        with open("/proc/self/stat", "rb") as stat:
            line = stat.read()
    except OSError:
        return None
    fields = line[line.rindex(b")") + 2 :].split()  # the command name may hold spaces; field 3 comes next
    try:
        return int(fields[50 - 3]), int(fields[51 - 3])
    except (IndexError, ValueError):
        return None


def _scrub(names: set[str], values: set[bytes]) -> int:
    """Overwrite the values of *names* (and any entry whose value is one of *values*) in the start-up
    environment block; the number of entries scrubbed."""
    import ctypes

    region = _env_region()
    if region is None or region[1] <= region[0]:
        return 0
    start, end = region
    with open("/proc/self/mem", "rb", buffering=0) as memory:  # a read that proves the region is mapped:
        memory.seek(start)  # an unmapped address is an OSError here, never a crash in ctypes
        block = memory.read(end - start)
    if len(block) != end - start:
        return 0
    scrubbed = 0
    offset = 0
    for entry in block.split(b"\0"):
        name, equals, value = entry.partition(b"=")
        if equals and value and (name.decode("utf-8", "replace") in names or value in values):
            ctypes.memset(start + offset + len(name) + 1, 0, len(value))
            scrubbed += 1
        offset += len(entry) + 1
    return scrubbed


def seal_process(policy: SecretPolicy, env: MutableMapping[str, str] | None = None) -> list[str]:
    """Scrub the withheld variables from the start-up environment block and libc's ``environ`` and make the
    process non-dumpable (see the module docstring); the problems met, as short texts (empty when all went
    well). *env* is ``os.environ``; it is read, never changed."""
    env = os.environ if env is None else env
    names = set(policy.withheld(env))
    values = {value.encode("utf-8", "surrogateescape") for value, _ in policy.secret_values(env)}
    problems: list[str] = []
    for name in names:
        try:
            os.unsetenv(name)  # libc's environ only: os.environ keeps the value for the providers
        except OSError as exc:
            problems.append(f"unsetenv {name}: {exc}")
    if not sys.platform.startswith("linux"):
        return [*problems, f"the start-up environment cannot be scrubbed on {sys.platform}"]
    try:
        _scrub(names, values)
    except (OSError, ValueError) as exc:
        problems.append(f"cannot scrub the start-up environment: {exc}")
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
            problems.append(f"prctl(PR_SET_DUMPABLE, 0): {os.strerror(ctypes.get_errno())}")
    except (OSError, AttributeError) as exc:
        problems.append(f"prctl(PR_SET_DUMPABLE, 0): {exc}")
    return problems


def seal_and_adopt(warn: Callable[[str, str], None], outlive: str, policy: SecretPolicy | None = None) -> None:
    """What every front end does once the policy is installed (RFC 0024), in one place: provider keys leave
    this process's start-up environment block and it becomes non-dumpable (:func:`seal_process`), so a command
    the model runs cannot read them from ``/proc/$PPID``; and the process becomes its descendants' subreaper
    (:func:`dsh.reaper.become_subreaper`: orphans of its children stay its own, so they end with their session).
    A platform that allows neither is ``warn(message, problem)``, never a failure; *outlive* names what
    descendants that leave their process group may outlive ("dsh", "the run"). *policy*: the application's
    (``ctx.get("secret_policy")``); None: :func:`~dsh.secrets.current_policy`."""
    from dsh.reaper import become_subreaper
    from dsh.secrets._policy import current_policy

    for problem in seal_process(policy if policy is not None else current_policy()):
        warn("cannot keep secrets from child processes", problem)
    refused = become_subreaper()
    if refused is not None:
        warn(f"descendants that leave their process group may outlive {outlive}", refused)
