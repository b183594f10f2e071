"""Opening a file a tool reads or writes without ever blocking on it, and only if it is a regular file.

A FIFO opened for reading blocks until a writer comes (forever, if none does); a device or a socket can block
or stream without end. A tool that opened one would hold a worker thread for good, and enough of them hold
every session's file tools (issue 34: 45 FIFO reads used up all 40 worker threads).

Guarantees of :func:`open_regular`: the open itself never blocks (``O_NONBLOCK``); the descriptor is checked
with ``fstat`` (the very file opened, no race with a ``stat`` before); anything but a regular file is closed
again and refused with :class:`NotRegularFileError`, a :class:`~dsh.tools._errors.ToolError` whose message
names what it is (``a FIFO (named pipe)``, ``a character device``, ``a socket``, …); a regular file's
descriptor is returned in blocking mode. Opening for writing never truncates before the check (the caller
truncates the regular file it got).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat

from dsh.tools._errors import ToolError
from dsh.tools._safeopen import open_checked

__all__ = ["NotRegularFileError", "file_kind", "open_regular"]

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISLNK, "a symbolic link"),
)


class NotRegularFileError(ToolError):
    """The path names something other than a regular file (a FIFO, a device, a socket)."""

    default_code = "NOT_REGULAR_FILE"


def file_kind(mode: int) -> str:
    """What *mode* (``st_mode``) is, in words: ``a regular file``, ``a FIFO (named pipe)``, …"""
    if stat.S_ISREG(mode):
        return "a regular file"
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _refusal(shown: str, mode: int) -> NotRegularFileError:
    return NotRegularFileError(
        f"{shown} is {file_kind(mode)}, not a regular file: the file tools read and write only regular files "
        "(reading this one could block or never end)"
    )


def open_regular(real: str, flags: int = os.O_RDONLY, *, shown: str = "", checked: bool = True) -> int:
    """A blocking descriptor of the regular file at *real* (see the module docstring); *shown* names it in the
    error. *checked*: *real* is a checked real path, opened without following any symlink
    (:func:`~dsh.tools._safeopen.open_checked`); otherwise it is opened as it is."""
    flags = (flags & ~os.O_TRUNC) | os.O_NONBLOCK
    try:
        fd = open_checked(real, flags) if checked else os.open(real, flags | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:  # a socket (ENXIO), a FIFO opened for writing with no reader (ENXIO), …
        if error.errno not in (errno.ENXIO, errno.ENODEV, errno.EOPNOTSUPP):
            raise
        try:
            mode = os.stat(real).st_mode
        except OSError:
            raise error from None
        if stat.S_ISREG(mode):
            raise
        raise _refusal(shown or real, mode) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _refusal(shown or real, mode)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd
