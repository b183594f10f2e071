"""Finding and ending the daemon's descendants through ``/proc`` (see the package docstring)."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path

__all__ = [
    "DAEMON_VARIABLE",
    "TAG_VARIABLE",
    "SessionTags",
    "arm_watchdog",
    "become_subreaper",
    "current_tag",
    "descendants",
    "end_descendants",
    "end_tagged",
    "is_subreaper",
    "tag_environment",
    "watchdog_pid",
]

TAG_VARIABLE = "DSH_SESSION_TAG"
"""The environment variable naming the session a process was started for (its descendants inherit it)."""
DAEMON_VARIABLE = "DSH_DAEMON_TAGS"
"""The environment variable listing (``:``-separated) the tokens of the dsh daemons a process was started under:
the daemon's watchdog ends every process carrying its token when the daemon is gone (:mod:`._watchdog`)."""
_PR_SET_CHILD_SUBREAPER = 36
_REAP_WITHIN = 0.5
_tag: ContextVar[tuple[str, SessionTags] | None] = ContextVar("dsh_session_tag", default=None)
"""The running task's tag and the owner that set it (where :func:`tag_environment` records the hand-out)."""
_subreaper = False


class SessionTags:
    """The session tags one owner (the ``reaper`` plugin's service, an MCP manager) put on the processes started
    under :meth:`tagged`, and the ending of those processes (:meth:`end`).

    The tags some child was actually started with are remembered here, per owner and so per application (not per
    process: a second application in the process has its own), so :meth:`end` scans ``/proc`` only for these
    (most sessions start no process at all, and a scan reads every process's ``stat``). :meth:`clear` forgets
    them (the owner's scope is disposed)."""

    __slots__ = ("_handed_out",)

    def __init__(self) -> None:
        self._handed_out: set[str] = set()

    @contextlib.contextmanager
    def tagged(self, tag: str) -> Iterator[None]:
        """Processes started in this block (and in tasks it starts) carry *tag*, handed out by this owner."""
        token = _tag.set((tag, self))
        try:
            yield
        finally:
            _tag.reset(token)

    def handed_out(self, tag: str) -> bool:
        """Whether some child was started with *tag* under this owner (and not ended since)."""
        return tag in self._handed_out

    def end(self, tag: str) -> list[int]:
        """End the descendants carrying *tag* when this owner handed it out (:func:`end_tagged`); the pids
        signalled. Blocking: call it from a worker thread in async code."""
        if tag not in self._handed_out:
            return []
        self._handed_out.discard(tag)
        return end_tagged(tag)

    def clear(self) -> None:
        self._handed_out.clear()


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


_watchdog: subprocess.Popen[bytes] | None = None
_watchdog_pipe: int | None = None
_token: str | None = None
_watchdog_lock = threading.Lock()


def arm_watchdog() -> str | None:
    """Start this daemon's watchdog (once; see :mod:`._watchdog`): from now on every child started with
    :func:`tag_environment` carries this daemon's token and is ended by the watchdog when the daemon dies, kill -9
    included. Only in a process that became a subreaper (a daemon: never in a test runner or a library user); None,
    or why it could not."""
    global _watchdog, _watchdog_pipe, _token
    if not _subreaper:
        return "not a daemon (no child subreaper)"
    with _watchdog_lock:
        if _watchdog is not None:
            return None
        token = secrets.token_hex(8)
        reader, writer = os.pipe()  # both ends close-on-exec: no child of ours ever holds the daemon's end
        try:
            process = subprocess.Popen(
                [sys.executable, "-I", "-S", str(Path(__file__).with_name("_watchdog.py")), token],
                stdin=reader,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env={},
                close_fds=True,
                start_new_session=True,
            )
        except OSError as exc:
            os.close(writer)
            return f"cannot start the watchdog: {exc}"
        finally:
            os.close(reader)
        _watchdog, _watchdog_pipe, _token = process, writer, token
    return None


def watchdog_pid() -> int | None:
    """The watchdog's pid (None before :func:`arm_watchdog`): it is the daemon's child, and must outlive it."""
    return _watchdog.pid if _watchdog is not None else None


def _daemon_tags() -> dict[str, str]:
    if not _subreaper:
        return {}
    if _watchdog is None and arm_watchdog() is not None:
        return {}
    assert _token is not None
    inherited = os.environ.get(DAEMON_VARIABLE, "")  # a daemon started by another dsh's command: both sweep
    return {DAEMON_VARIABLE: f"{inherited}:{_token}" if inherited else _token}


def current_tag() -> str | None:
    current = _tag.get()
    return current[0] if current is not None else None


def tag_environment() -> dict[str, str]:
    """What a child started now adds to its environment: ``{DSH_SESSION_TAG: tag}`` (nothing untagged) and, in a
    daemon, ``{DSH_DAEMON_TAGS: ...}`` with this daemon's token (the watchdog is started on the first call)."""
    tags = _daemon_tags()
    current = _tag.get()
    if current is None or not current[0]:
        return tags
    tag, owner = current
    owner._handed_out.add(tag)
    return {**tags, TAG_VARIABLE: tag}


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
    """Every live descendant of *root* (default: this process), parents before children; this daemon's watchdog
    (and nothing below it: it starts nothing) is left out."""
    root = os.getpid() if root is None else root
    spared = watchdog_pid()
    children: dict[int, list[int]] = {}
    for pid, parent in _parents().items():
        children.setdefault(parent, []).append(pid)
    found: list[int] = []
    frontier = [root]
    while frontier:
        pid = frontier.pop()
        for child in children.get(pid, ()):
            if child == spared:
                continue
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
    from a worker thread in async code. It always scans: :meth:`SessionTags.end` scans only for a tag handed
    out."""
    if not sys.platform.startswith("linux"):
        return []
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
