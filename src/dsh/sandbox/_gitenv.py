"""The environment that keeps git from running a program the repository configured.

A repository's own configuration (``.git/config`` and what it includes) can name programs git runs on its
own: the file-system monitor, hooks, the pager, an external diff, diff drivers' ``textconv`` and ``command``,
filters' ``clean``/``smudge``/``process``, merge drivers. ``git status`` or ``git diff`` would then run them.
:func:`git_environment` returns variables that override them through ``GIT_CONFIG_COUNT`` /
``GIT_CONFIG_KEY_n`` / ``GIT_CONFIG_VALUE_n`` (command-line scope: above every file).

Guarantees:

* Always: ``core.fsmonitor=false``, ``core.hooksPath=/dev/null`` (no hook runs, the user's included),
  ``core.pager=cat``, ``GIT_PAGER=cat``, ``pager.*`` off through ``GIT_PAGER``.
* Every diff driver, filter and merge driver the repository's configuration defines (read from the
  repository enclosing the command's directory, includes followed to depth 5) is overridden: ``textconv``,
  ``clean`` and ``smudge`` become ``cat`` (the bytes as they are), ``command``, ``process`` and ``driver``
  become an empty program (git reports an error instead of running anything), ``diff.external`` likewise when
  the repository sets it (``git diff --no-ext-diff`` still works).
* Variables of the same names already in the environment are replaced, not extended; other ``GIT_CONFIG_*``
  entries the user set are kept after ours would be wrong (a later entry wins), so they are dropped.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

__all__ = ["git_environment", "repository_overrides"]

_ALWAYS = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
)
_SECTION = re.compile(r'^\s*\[\s*([A-Za-z0-9.-]+)(?:\s+"((?:[^"\\]|\\.)*)")?\s*\]\s*(.*)$')
_KEY = re.compile(r"^\s*([A-Za-z][A-Za-z0-9-]*)\s*(?:=\s*(.*))?$")
_DRIVERS = {
    ("diff", "textconv"): "cat",
    ("diff", "command"): "",
    ("filter", "clean"): "cat",
    ("filter", "smudge"): "cat",
    ("filter", "process"): "",
    ("merge", "driver"): "",
}


def _git_dir(cwd: str) -> str | None:
    directory = os.path.abspath(cwd)
    while True:
        candidate = os.path.join(directory, ".git")
        if os.path.isdir(candidate):
            return candidate
        if os.path.isfile(candidate):
            try:
                with open(candidate, encoding="utf-8") as file:
                    line = file.readline().strip()
            except (OSError, UnicodeDecodeError):
                return None
            if line.startswith("gitdir:"):
                return os.path.normpath(os.path.join(directory, line.removeprefix("gitdir:").strip()))
            return None
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def _entries(path: str, depth: int, seen: set[str]) -> Iterator[tuple[str, str | None, str]]:
    """``(section, subsection, key)`` of every entry of the config file *path* and what it includes."""
    real = os.path.realpath(path)
    if depth > 5 or real in seen:
        return
    seen.add(real)
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            text = file.read(1 << 20)
    except OSError:
        return
    section, subsection = "", None
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].split(";", 1)[0] if '"' not in raw else raw
        header = _SECTION.match(line)
        if header:
            name = header.group(1).lower()
            section, _, dotted = name.partition(".")
            subsection = header.group(2) if header.group(2) is not None else (dotted or None)
            line = header.group(3)
            if not line.strip():
                continue
        match = _KEY.match(line)
        if not match:
            continue
        key = match.group(1).lower()
        yield section, subsection, key
        if section in ("include", "includeif") and key == "path" and match.group(2):
            target = os.path.expanduser(match.group(2).strip().strip('"'))
            if not os.path.isabs(target):
                target = os.path.join(os.path.dirname(path), target)
            yield from _entries(target, depth + 1, seen)


def repository_overrides(cwd: str) -> list[tuple[str, str]]:
    """The ``(key, value)`` overrides for the drivers the repository enclosing *cwd* defines."""
    git_dir = _git_dir(cwd)
    if git_dir is None:
        return []
    files = [os.path.join(git_dir, "config"), os.path.join(git_dir, "config.worktree")]
    try:
        with open(os.path.join(git_dir, "commondir"), encoding="utf-8") as file:
            common = os.path.normpath(os.path.join(git_dir, file.readline().strip()))
        files += [os.path.join(common, "config"), os.path.join(common, "config.worktree")]
    except (OSError, UnicodeDecodeError):
        pass
    seen: set[str] = set()
    found: dict[str, str] = {}
    for config in files:
        for section, subsection, key in _entries(config, 0, seen):
            if section == "diff" and subsection is None and key == "external":
                found["diff.external"] = ""
                continue
            value = _DRIVERS.get((section, key))
            if value is not None and subsection is not None:
                found[f"{section}.{subsection}.{key}"] = value
    return list(found.items())


def git_environment(env: dict[str, str], cwd: str) -> dict[str, str]:
    """*env* with git's program-running configuration neutralised for a command run in *cwd* (see the module
    docstring); a new dict."""
    out = {
        name: value
        for name, value in env.items()
        if not name.startswith("GIT_CONFIG_KEY_") and not name.startswith("GIT_CONFIG_VALUE_")
    }
    pairs = [*_ALWAYS, *repository_overrides(cwd)]
    out["GIT_CONFIG_COUNT"] = str(len(pairs))
    for index, (key, value) in enumerate(pairs):
        out[f"GIT_CONFIG_KEY_{index}"] = key
        out[f"GIT_CONFIG_VALUE_{index}"] = value
    out["GIT_PAGER"] = "cat"
    out.pop("GIT_EXTERNAL_DIFF", None)
    return out
