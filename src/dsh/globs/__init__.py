"""One glob dialect for every user- or model-written path pattern: permission rules, the ``glob`` tool, the
``grep`` tool's file filter (see README.md and RFC 0041)."""

from dsh.globs._glob import Glob, GlobError, compile_glob, has_magic

__all__ = [
    "Glob",
    "GlobError",
    "compile_glob",
    "has_magic",
]
