"""Open what was checked: a path whose real location a tool verified is opened without following any symlink.

The path check (:func:`dsh.tools._paths.resolve_path`) decides on the *real* path (every symlink resolved). Opening
the lexical path afterwards would resolve the symlinks a second time, so a link swapped between the check and the
open would let the tool read or write outside the project. Instead the real path, which has no symlinks, is
opened one component at a time from ``/`` with ``O_NOFOLLOW`` (``openat``-style walking through directory file
descriptors): if any component has become a symlink since the check, the open fails with
:class:`PathChangedError` instead of following it.

Guarantees:

* :func:`open_checked` either returns a descriptor of the very file or directory named by the real path it was
  given, reached without following a single symlink, or raises; it never opens anything else.
* With ``create_parents``, missing directories are created one at a time (``mkdirat``) and then opened like the
  others, so a directory replaced by a symlink in between is refused too.
* Errors keep the usual types (:class:`FileNotFoundError`, :class:`IsADirectoryError`, :class:`NotADirectoryError`,
  :class:`PermissionError`); a symlink met on the way is :class:`PathChangedError`.

Not covered (RFC 0010): hard links (a hard link inside the project to a file outside it is that file; creating
one needs write access to the project and, with ``fs.protected_hardlinks``, ownership of the target) and
bind mounts.
"""

from __future__ import annotations

import errno
import os
import stat

__all__ = ["PathChangedError", "open_checked"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_PATH_FLAG = getattr(os, "O_PATH", 0)
"""Linux: walk directories with ``O_PATH`` (needs only search permission on them, like a path lookup does)."""


class PathChangedError(OSError):
    """A component of a checked path is now a symlink: the path changed between its check and its use."""

    def __init__(self, path: str) -> None:
        super().__init__(errno.ELOOP, f"{path} changed while in use (a symlink appeared in it)", path)


def _is_link(name: str, parent: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _open_dir(name: str, parent: int, real: str, *, create: bool) -> int:
    if create:
        try:
            os.mkdir(name, dir_fd=parent)
        except FileExistsError:
            pass
    try:
        return os.open(name, _DIR_FLAGS | _PATH_FLAG, dir_fd=parent)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(name, parent):
            raise PathChangedError(real) from None
        raise


def open_checked(real: str, flags: int, mode: int = 0o666, *, create_parents: bool = False) -> int:
    """Open the absolute, symlink-free *real* path with *flags* (``O_NOFOLLOW`` and ``O_CLOEXEC`` are added),
    walking from ``/`` without following any symlink; see the module docstring. The caller closes the result."""
    if not os.path.isabs(real):
        raise ValueError(f"open_checked needs an absolute path, got {real!r}")
    parts = [part for part in real.split(os.sep) if part]
    if any(part in (".", "..") for part in parts):
        raise ValueError(f"open_checked needs a normalised path, got {real!r}")
    directory = os.open(os.sep, _DIR_FLAGS | _PATH_FLAG)
    try:
        if not parts:  # the root itself
            return os.open(os.sep, flags | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), mode)
        for name in parts[:-1]:
            child = _open_dir(name, directory, real, create=create_parents)
            os.close(directory)
            directory = child
        final = parts[-1]
        try:
            return os.open(final, flags | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), mode, dir_fd=directory)
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK) and _is_link(final, directory):
                raise PathChangedError(real) from None
            raise
    finally:
        os.close(directory)
