"""What confinement this machine offers, probed once per process.

Guarantees of :func:`support`:

* It never raises; ``available`` is True only when Landlock (ABI 1 or later) works here. ``namespaces`` is
  True only when a child could actually be started in a new user, network and mount namespace (probed by
  starting ``true`` that way, a few milliseconds once).
* ``DSH_SANDBOX_SIMULATE`` makes a test see a lesser machine: ``unavailable`` (no Landlock, hence no
  sandbox), ``no-namespaces`` (Landlock only). The reason then says it was simulated.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
from dataclasses import dataclass

__all__ = ["SIMULATE_ENV", "Support", "support"]

SIMULATE_ENV = "DSH_SANDBOX_SIMULATE"


@dataclass(frozen=True, slots=True)
class Support:
    available: bool
    abi: int
    namespaces: bool
    why: str
    """Why there is no sandbox (or what is missing); empty when everything is there."""

    def describe(self) -> str:
        """One line for ``dsh config show``, ``/status`` and the start-up log."""
        if not self.available:
            return f"unavailable ({self.why}): every command asks first and runs unconfined once approved"
        parts = [f"Landlock ABI {self.abi}"]
        parts.append("user and network namespaces" if self.namespaces else f"no namespaces ({self.why})")
        return "on: " + ", ".join(parts)


@functools.cache
def _probe_namespaces() -> bool:
    import subprocess

    from dsh.sandbox._child import CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWUSER
    from dsh.sandbox._landlock import _libc

    libc = _libc()
    if libc is None:
        return False
    uid, gid = os.getuid(), os.getgid()

    def step() -> None:
        if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS) != 0:
            os._exit(3)
        for path, data in (
            ("setgroups", b"deny"),
            ("uid_map", f"{uid} {uid} 1".encode()),
            ("gid_map", f"{gid} {gid} 1".encode()),
        ):
            fd = os.open(f"/proc/self/{path}", os.O_WRONLY)
            os.write(fd, data)
            os.close(fd)

    true = "/bin/true" if os.path.exists("/bin/true") else "/usr/bin/true"
    try:
        done = subprocess.run(
            [true],
            preexec_fn=step,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


_LOCK = threading.Lock()


def support() -> Support:
    """This machine's confinement (see the module docstring); probed once, a second caller waits for the first."""
    with _LOCK:
        return _support()


@functools.cache
def _support() -> Support:
    simulate = os.environ.get(SIMULATE_ENV, "")
    if simulate == "unavailable":
        return Support(False, 0, False, f"simulated by {SIMULATE_ENV}=unavailable")
    if not sys.platform.startswith("linux"):
        return Support(False, 0, False, f"no OS sandbox for {sys.platform} yet")
    from dsh.sandbox._landlock import abi

    version = abi()
    if version < 1:
        return Support(False, 0, False, "this kernel offers no Landlock (or it is disabled)")
    if simulate == "no-namespaces":
        return Support(True, version, False, f"simulated by {SIMULATE_ENV}=no-namespaces")
    if not _probe_namespaces():
        return Support(True, version, False, "user namespaces are not allowed here")
    return Support(True, version, True, "")
