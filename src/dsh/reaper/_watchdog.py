"""The daemon's watchdog: a tiny process that outlives a killed daemon just long enough to end what it started.

Run as ``python -I -S _watchdog.py TOKEN`` with a pipe from the daemon on its stdin and nothing else (no dsh
import, an empty environment, its own session, so a signal to the editor's process group does not reach it). It
blocks reading the pipe; the read returns end-of-file when the daemon is gone, whatever ended it (exit, a crash,
``kill -9``: the kernel closes the daemon's end). Then it sweeps: every process whose environment carries TOKEN in
``DSH_DAEMON_TAGS`` (every process dsh starts for a session gets it, and its descendants inherit it across
``setsid``, double forks and re-parenting to init) gets ``SIGKILL``, in rounds until a round finds none (what
one of them forked while being found is found by the next), and the watchdog exits.

Not found: a descendant that replaced its environment (``env -i``), or one running as another user whose
``/proc/PID/environ`` this user cannot read. Linux only (``/proc``).
"""

from __future__ import annotations

import os
import signal
import sys
import time

VARIABLE = b"DSH_DAEMON_TAGS="
ROUNDS_QUIET = 2
"""Consecutive rounds that must find nothing before the sweep ends."""
SWEEP_FOR = 10.0
"""Seconds at most spent sweeping (a fork loop that outruns the rounds is given up on, not chased forever)."""


def carries(pid: str, token: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as file:
            environ = file.read()
    except OSError:
        return False
    for entry in environ.split(b"\0"):
        if entry.startswith(VARIABLE):
            return token in entry[len(VARIABLE) :].split(b":")
    return False


def sweep(token: bytes) -> int:
    """SIGKILL every process carrying *token* until none is left; how many were signalled."""
    me = str(os.getpid())
    ended: set[str] = set()
    quiet = 0
    deadline = time.monotonic() + SWEEP_FOR
    while quiet < ROUNDS_QUIET and time.monotonic() < deadline:
        found = 0
        try:
            names = os.listdir("/proc")
        except OSError:
            return len(ended)
        for name in names:
            if not name.isdigit() or name == me or not carries(name, token):
                continue
            try:
                os.kill(int(name), signal.SIGKILL)
            except OSError:
                continue
            if name not in ended:
                ended.add(name)
                found += 1
        quiet = quiet + 1 if not found else 0
        if quiet < ROUNDS_QUIET:
            time.sleep(0.02)
    return len(ended)


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[1]:
        return 2
    for number in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(number, signal.SIG_IGN)
    while True:
        try:
            if not os.read(0, 4096):
                break
        except InterruptedError:
            continue
        except OSError:
            break
    sweep(argv[1].encode())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
