"""What the forked child does between fork and exec: namespaces, read-only bind mounts, the parent-death signal,
then Landlock. Everything is computed in the parent; the child only makes system calls.

Guarantees of the function :func:`confine_step` returns:

* Steps run in this order: ``unshare`` (user namespace, plus a network namespace for a full network cut and a
  mount namespace for read-only binds, never propagated back to the daemon's), the identity maps (the same uid and gid inside as outside), each
  read-only bind mount, ``PR_SET_PDEATHSIG`` (after ``unshare``: the child still dies with the daemon), then
  Landlock (last: a Landlock domain forbids mounting).
* Any step that fails raises: :mod:`subprocess` then reports the failure in the parent and nothing is exec'd.
  A command never runs with less confinement than was asked for.
"""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass

from dsh.sandbox._landlock import _libc, restrict_self

__all__ = ["CLONE_NEWNET", "CLONE_NEWNS", "CLONE_NEWUSER", "ChildPlan", "confine_step", "locked_flags"]

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000

_MS_RDONLY = 1
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_NOEXEC = 8
_MS_REMOUNT = 32
_MS_BIND = 4096
_MS_REC = 16384
_MS_NOATIME = 1024
_MS_NODIRATIME = 2048
_MS_RELATIME = 1 << 21
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True, slots=True)
class ChildPlan:
    """What the child does: *unshare* flags (0: none), read-only *binds* (path, flags the remount must keep),
    the Landlock *ruleset* descriptor (made in the parent), and the daemon's pid for the parent-death check."""

    unshare: int
    binds: tuple[tuple[bytes, int], ...]
    ruleset: int
    parent: int
    uid: int
    gid: int


def locked_flags(path: str) -> int:
    """The mount flags a read-only remount of *path* must repeat (a user namespace may not drop them)."""
    flags = os.statvfs(path).f_flag
    out = 0
    for st, ms in (
        (os.ST_NOSUID, _MS_NOSUID),
        (os.ST_NODEV, _MS_NODEV),
        (os.ST_NOEXEC, _MS_NOEXEC),
        (os.ST_NOATIME, _MS_NOATIME),
        (os.ST_NODIRATIME, _MS_NODIRATIME),
        (os.ST_RELATIME, _MS_RELATIME),
    ):
        if flags & st:
            out |= ms
    return out


def _write(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def confine_step(plan: ChildPlan) -> Callable[[], None]:
    """The ``preexec_fn`` step that applies *plan* in the child (see the module docstring)."""
    libc = _libc()
    if libc is None:
        raise OSError("no libc: cannot confine")
    unshare = libc.unshare
    mount = libc.mount
    prctl = libc.prctl
    uid_map = f"{plan.uid} {plan.uid} 1".encode()
    gid_map = f"{plan.gid} {plan.gid} 1".encode()
    null = ctypes.c_char_p(None)

    def step() -> None:
        if plan.unshare:
            if unshare(plan.unshare) != 0:
                raise OSError(ctypes.get_errno(), "unshare")
            _write("/proc/self/setgroups", b"deny")
            _write("/proc/self/uid_map", uid_map)
            _write("/proc/self/gid_map", gid_map)
            # A mount namespace made together with a user namespace holds the copied mounts as slaves (mount_namespaces(7):
            # a less privileged namespace), so the binds below never propagate back: no make-rprivate of / is needed.
            for path, keep in plan.binds:
                if mount(path, path, null, _MS_BIND | _MS_REC, null) != 0:
                    raise OSError(ctypes.get_errno(), f"bind {path!r}")
                if mount(null, path, null, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | keep, null) != 0:
                    raise OSError(ctypes.get_errno(), f"remount read-only {path!r}")
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != plan.parent:
            os._exit(127)
        restrict_self(plan.ruleset)

    return step
