"""Finding and ending the daemon's descendants through ``/proc`` (see the package docstring)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterator
from contextvars import ContextVar

__all__ = [
    "TAG_VARIABLE",
    "become_subreaper",
    "current_tag",
    "descendants",
    "end_descendants",
    "end_tagged",
    "is_subreaper",
    "tag_environment",
    "tagged",
]

TAG_VARIABLE = "DSH_SESSION_TAG"
"""The environment variable naming the session a process was started for (its descendants inherit it)."""
_PR_SET_CHILD_SUBREAPER = 36
_REAP_WITHIN = 0.5
_tag: ContextVar[str | None] = ContextVar("dsh_session_tag", default=None)
_subreaper = False
_handed_out: set[str] = set()
"""Tags some child was started with: :func:`end_tagged` scans ``/proc`` only for these (most sessions start no
process at all, and a scan reads every process's ``stat``)."""


def become_subreaper() -> str | None:
    """Make this process the child subreaper of its descendants; None, or why it could not."""
    global _subreaper
    if not sys.platform.startswith("linux"):
        return f"no child subreaper on {sys.platform}"
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            return f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(ctypes.get_errno())}"
    except (OSError, AttributeError) as exc:
        return f"prctl(PR_SET_CHILD_SUBREAPER): {exc}"
    _subreaper = True
    return None


def is_subreaper() -> bool:
    return _subreaper


@contextlib.contextmanager
def tagged(tag: str) -> Iterator[None]:
    """Processes started in this block (and in tasks it starts) carry *tag*."""
    token = _tag.set(tag)
    try:
        yield
    finally:
        _tag.reset(token)


def current_tag() -> str | None:
    return _tag.get()


def tag_environment() -> dict[str, str]:
    """What a child started now adds to its environment: ``{DSH_SESSION_TAG: tag}``, or nothing untagged."""
    tag = _tag.get()
    if not tag:
        return {}
    _handed_out.add(tag)
    return {TAG_VARIABLE: tag}


def _parents() -> dict[int, int]:
    """pid → ppid of every process visible now."""
    parents: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return parents
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                line = stat.read()
            parents[int(name)] = int(line[line.rindex(b")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return parents


def descendants(root: int | None = None) -> list[int]:
    """Every live descendant of *root* (default: this process), parents before children."""
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    for pid, parent in _parents().items():
        children.setdefault(parent, []).append(pid)
    found: list[int] = []
    frontier = [root]
    while frontier:
        pid = frontier.pop()
        for child in children.get(pid, ()):
            found.append(child)
            frontier.append(child)
    return found


def _carries(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            return needle in b"\0" + environ.read()
    except OSError:
        return False


def _end(pids: list[int]) -> list[int]:
    """SIGKILL *pids*; reap those that became our children (not ones we started: a command's or a server's
    own process is waited for by whoever started it, and is never in these lists once its owner closed it)."""
    ended: list[int] = []
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
            ended.append(pid)
        except (ProcessLookupError, PermissionError):
            continue
    me = os.getpid()
    adopted = [pid for pid in ended if _parents_of(pid) == me]
    deadline = time.monotonic() + _REAP_WITHIN
    while adopted and time.monotonic() < deadline:
        for pid in list(adopted):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid  # someone else reaped it
            if done:
                adopted.remove(pid)
        if adopted:
            time.sleep(0.005)
    return ended


def _parents_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            line = stat.read()
        return int(line[line.rindex(b")") + 2 :].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def end_tagged(tag: str) -> list[int]:
    """End every descendant of this process whose environment carries *tag* (a few rounds, so what one of them
    forked while being found is found too); the pids signalled. Blocking (up to half a second to reap): call it
    from a worker thread in async code."""
    if not sys.platform.startswith("linux") or tag not in _handed_out:
        return []
    _handed_out.discard(tag)
    needle = f"\0{TAG_VARIABLE}={tag}\0".encode()
    ended: list[int] = []
    for _ in range(3):
        found = [pid for pid in descendants() if pid not in ended and _carries(pid, needle)]
        if not found:
            break
        ended += _end(found)
    return ended


def end_descendants() -> list[int]:
    """End every descendant of this process (daemon exit); the pids signalled."""
    if not sys.platform.startswith("linux"):
        return []
    ended: list[int] = []
    for _ in range(3):
        found = [pid for pid in descendants() if pid not in ended]
        if not found:
            break
        ended += _end(found)
    return ended
