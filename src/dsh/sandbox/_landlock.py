"""Landlock through its three system calls (ctypes over libc's ``syscall``): the ABI probe, rulesets built in
the parent, and the two calls the child makes between fork and exec.

Guarantees:

* :func:`abi` asks the kernel once (``landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)``) and
  returns 0 where Landlock is missing (not Linux, an old kernel, Landlock not enabled at boot, a seccomp filter
  that refuses the call). Nothing here raises on a machine without Landlock but :func:`build_ruleset`.
* :func:`build_ruleset` handles every filesystem right the ABI knows, TCP bind and connect from ABI 4 and the
  signal and abstract-socket scopes from ABI 6; whatever it is not given a rule for is denied. A path that
  does not exist is skipped (a toolchain that is not installed); a rule the kernel refuses raises
  :class:`OSError`, so a ruleset is never silently wider or narrower than asked.
* :func:`restrict_self` is what the forked child calls: ``PR_SET_NO_NEW_PRIVS`` then
  ``landlock_restrict_self`` on the ruleset descriptor made in the parent. It only calls functions looked up
  before the fork and allocates nothing the child could deadlock on.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import stat
import sys
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "FILE_RIGHTS",
    "Rule",
    "abi",
    "build_ruleset",
    "read_rights",
    "restrict_self",
    "write_rights",
]

_CREATE_RULESET = 444  # the same number on every architecture (the unified system call table)
_ADD_RULE = 445
_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_RULE_NET_PORT = 2
_PR_SET_NO_NEW_PRIVS = 38

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5

NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1

SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1

FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
"""The rights that may be granted on a file (not a directory): the kernel refuses the others there."""


def _fs_rights(version: int) -> int:
    """Every filesystem right ABI *version* knows."""
    rights = (1 << 13) - 1
    if version >= 2:
        rights |= REFER
    if version >= 3:
        rights |= TRUNCATE
    if version >= 5:
        rights |= IOCTL_DEV
    return rights


def read_rights() -> int:
    """Reading files and listing and entering directories, and executing programs."""
    return EXECUTE | READ_FILE | READ_DIR


def write_rights(version: int) -> int:
    """Everything on the filesystem (creating, writing, removing, renaming within granted trees)."""
    return _fs_rights(version)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class _NetPortAttr(ctypes.Structure):
    _fields_ = [("allowed_access", ctypes.c_uint64), ("port", ctypes.c_uint64)]


@functools.cache
def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:  # pragma: no cover - a Linux without a usable libc
        return None


def _syscall(*args: object) -> int:
    libc = _libc()
    if libc is None:
        raise OSError("no libc")
    return int(libc.syscall(*args))


@functools.cache
def abi() -> int:
    """The Landlock ABI version this kernel offers; 0 where there is none."""
    if _libc() is None or platform.machine() not in _KNOWN_MACHINES:
        return 0
    version = _syscall(
        ctypes.c_long(_CREATE_RULESET), None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION)
    )
    return max(version, 0)


_KNOWN_MACHINES = frozenset(
    {"x86_64", "aarch64", "arm64", "riscv64", "ppc64le", "s390x", "loongarch64", "i686", "armv7l"}
)


@dataclass(frozen=True, slots=True)
class Rule:
    """Grant *rights* beneath *path* (a directory: the whole tree under it; a file: that file)."""

    path: str
    rights: int


def build_ruleset(version: int, rules: Iterable[Rule], *, cut_tcp: bool) -> int:
    """A Landlock ruleset descriptor (close-on-exec) handling every right *version* knows and granting *rules*;
    with *cut_tcp* (ABI 4+) TCP bind and connect are denied on every port. From ABI 6 the command can neither
    signal processes outside its domain nor connect to abstract Unix sockets made outside it."""
    if version < 1:
        raise OSError("Landlock is not available")
    handled = _fs_rights(version)
    attr = _RulesetAttr(handled, NET_BIND_TCP | NET_CONNECT_TCP if cut_tcp and version >= 4 else 0, 0)
    if version >= 6:
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
    size = ctypes.sizeof(_RulesetAttr) if version >= 6 else (16 if version >= 4 else 8)
    fd = _syscall(ctypes.c_long(_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"landlock_create_ruleset: {os.strerror(errno)}")
    try:
        for rule in rules:
            _add_path_rule(fd, rule, handled)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _add_path_rule(ruleset: int, rule: Rule, handled: int) -> None:
    try:
        target = os.open(rule.path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # not there (a toolchain that is not installed, a broken link): nothing to grant
    try:
        rights = rule.rights & handled
        if not stat.S_ISDIR(os.fstat(target).st_mode):
            rights &= FILE_RIGHTS
        if not rights:
            return
        attr = _PathBeneathAttr(rights, target)
        done = _syscall(
            ctypes.c_long(_ADD_RULE),
            ctypes.c_int(ruleset),
            ctypes.c_int(_RULE_PATH_BENEATH),
            ctypes.byref(attr),
            ctypes.c_uint32(0),
        )
        if done < 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"landlock_add_rule {rule.path}: {os.strerror(errno)}")
    finally:
        os.close(target)


def restrict_self(ruleset: int) -> None:
    """In the child: no new privileges, then the ruleset on this thread (and everything it will exec)."""
    libc = _libc()
    assert libc is not None
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if libc.syscall(ctypes.c_long(_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
        raise OSError(ctypes.get_errno(), "landlock_restrict_self")
