"""Where the configuration file is, without importing what loads it.

``dsh acp`` starts often and usually without a configuration file: finding out that there is none must not
import pydantic or the provider settings (:mod:`dsh.config`, which re-exports these functions, does).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["default_config_path", "find_config_file"]


def default_config_path() -> Path:
    """``$XDG_CONFIG_HOME/dsh/config.yaml``, else ``~/.config/dsh/config.yaml`` (whether or not it exists)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "dsh" / "config.yaml"


def find_config_file(explicit: str | Path | None) -> Path | None:
    """The file to load: *explicit* (``--config``, else ``DSH_CONFIG``, chosen by the caller; returned even when
    missing, so that loading it reports it), else :func:`default_config_path` only if it is a file, else None.
    Reads nothing but the default path's existence."""
    if explicit is not None and str(explicit) != "":
        return Path(explicit).expanduser()
    default = default_config_path()
    return default if default.is_file() else None
