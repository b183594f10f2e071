"""Where a confined command may read and write: the system's toolchain locations, ``/etc`` without the files
that hold secrets, a few device and ``/proc`` files, the toolchains' caches in the home directory, the roots and
the private temporary directory.

Guarantees:

* Nothing in the home directory is readable but the named toolchain directories (``~/.ssh``, ``~/.config``
  with dsh's own configuration, ``~/.aws``, shell histories are not).
* ``/proc`` is not readable as a whole (another process's ``environ`` holds the daemon's environment, provider
  keys included): only the files in :data:`PROC_FILES` and ``/proc/sys``.
* ``/etc`` is granted entry by entry, less :data:`ETC_SECRETS` (a pattern with a ``/`` descends into that
  directory and grants its other entries). An entry created in ``/etc`` after the ruleset was built is not
  readable.
"""

from __future__ import annotations

import fnmatch
import os
import sys
from collections.abc import Iterator

__all__ = ["ETC_SECRETS", "HOME_TOOLCHAINS", "PROC_FILES", "SYSTEM_READ", "etc_entries", "git_dirs", "home_toolchains"]

SYSTEM_READ = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/opt",
    "/nix/store",
    "/run/systemd/resolve",
)
"""Read and execute: the programs, libraries and toolchains of the system (a missing one is skipped)."""

PROC_FILES = (
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/proc/stat",
    "/proc/loadavg",
    "/proc/uptime",
    "/proc/version",
    "/proc/filesystems",
    "/proc/sys",
    "/sys/devices/system/cpu",
)
"""What a build tool reads to size itself; no process's directory."""

DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")
"""Read and write: the devices every shell script uses."""

ETC_SECRETS = (
    "shadow",
    "shadow-",
    "gshadow",
    "gshadow-",
    "sudoers",
    "sudoers.d",
    "security/opasswd",
    "ssh/ssh_host_*",
    "ssl/private",
    "pki/tls/private",
    "krb5.keytab",
    "NetworkManager/system-connections",
    "wpa_supplicant",
    "credstore",
    "credstore.encrypted",
    "ipsec.secrets",
    "wireguard",
    "openvpn",
    "ppp/chap-secrets",
    "ppp/pap-secrets",
    "docker/key.json",
    "libvirt/secrets",
    "dsh",
)
"""Entries of ``/etc`` (patterns, relative) a confined command cannot read."""

HOME_TOOLCHAINS = (
    ".cargo/bin",
    ".cargo/registry",
    ".cargo/git",
    ".rustup",
    ".pyenv",
    ".local/bin",
    ".local/lib",
    ".local/share/uv",
    ".cache/uv",
    ".cache/pip",
    ".nvm",
    ".npm/_cacache",
    ".bun/bin",
    ".deno",
    "go/pkg/mod",
    ".cache/go-build",
    ".m2/repository",
    ".gradle/caches",
    ".gradle/wrapper",
    ".sdkman/candidates",
    ".rbenv",
    ".gem",
)
"""Directories under the home directory a toolchain needs to read (caches and installed toolchains, never their
credential files: ``~/.cargo/credentials``, ``~/.npmrc``, ``~/.m2/settings.xml`` stay unreadable)."""


def _denied(relative: str) -> bool:
    return any(fnmatch.fnmatchcase(relative, pattern) for pattern in ETC_SECRETS)


def _descend(relative: str) -> bool:
    return any(pattern.startswith(relative + "/") for pattern in ETC_SECRETS)


def etc_entries(etc: str = "/etc") -> Iterator[str]:
    """The paths under *etc* to grant for reading: every entry but the secret ones (see the module docstring)."""
    yield from _walk(etc, "")


def _walk(base: str, relative: str) -> Iterator[str]:
    directory = os.path.join(base, relative) if relative else base
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return
    for name in names:
        child = f"{relative}/{name}" if relative else name
        if _denied(child):
            continue
        if (
            _descend(child)
            and os.path.isdir(os.path.join(base, child))
            and not os.path.islink(os.path.join(base, child))
        ):
            yield from _walk(base, child)
        else:
            yield os.path.join(base, child)


def home_toolchains(home: str | None = None) -> list[str]:
    """The toolchain directories under *home* (default: ``~``) and the Python dsh itself runs on."""
    home = home or os.path.expanduser("~")
    paths = [os.path.join(home, relative) for relative in HOME_TOOLCHAINS]
    paths += [sys.base_prefix, sys.prefix, sys.exec_prefix]
    return list(dict.fromkeys(paths))


def git_dirs(root: str) -> list[str]:
    """The repository directories a worktree's ``.git`` file points to (read-only for the sandbox: ``git status``
    in a linked worktree needs them); empty for an ordinary repository."""
    dot_git = os.path.join(root, ".git")
    if not os.path.isfile(dot_git):
        return []
    try:
        with open(dot_git, encoding="utf-8") as file:
            line = file.readline().strip()
    except (OSError, UnicodeDecodeError):
        return []
    if not line.startswith("gitdir:"):
        return []
    gitdir = os.path.normpath(os.path.join(root, line.removeprefix("gitdir:").strip()))
    found = [gitdir]
    try:
        with open(os.path.join(gitdir, "commondir"), encoding="utf-8") as file:
            found.append(os.path.normpath(os.path.join(gitdir, file.readline().strip())))
    except (OSError, UnicodeDecodeError):
        pass
    return found
