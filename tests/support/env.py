"""The environment of a spawned daemon, and scripted-model scripts.

Guarantee of :func:`sandbox_env`: nothing from the test runner's ``DSH_*`` settings leaks in, and whatever the
daemon stores (sessions, config, caches) lands under *workdir*, never in the real home directory.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["ROOT", "SRC", "path_without", "sandbox_env", "write_script"]

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"


def path_without(workdir: Path, *names: str, dirs: Iterable[str] = ("/usr/bin", "/bin")) -> str:
    """A ``PATH`` of one directory under *workdir* holding links to every program of *dirs* but *names*.

    For a daemon that must not find a program the machine has (``rg`` installed by the system's package
    manager, not only by the test set-up): leaving the directory out of ``PATH`` would hide everything else."""
    bin_dir = workdir / ("path-without-" + "-".join(names))
    bin_dir.mkdir(exist_ok=True)
    for directory in dirs:
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            link = bin_dir / entry.name
            if entry.name in names or link.exists() or link.is_symlink():
                continue
            link.symlink_to(entry.path)
    return str(bin_dir)


def sandbox_env(
    workdir: Path,
    model: str,
    *,
    data_dir: Path | None = None,
    plugins: Iterable[str] = (),
    python_path: Iterable[Path] = (),
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The daemon's whole environment: ``HOME`` and the XDG directories under *workdir*, sessions in *data_dir*
    (default ``workdir/dsh-data``), ``PYTHONPATH`` = *python_path*, ``src/``, the repository root, the runner's own;
    ``DSH_LSP=off`` (language servers are on by default in the product; a test of them sets ``DSH_LSP`` again);
    *extra* variables last (a provider's base URL and key)."""
    paths = [str(p) for p in python_path] + [str(SRC), str(ROOT)]
    if os.environ.get("PYTHONPATH"):
        paths.append(os.environ["PYTHONPATH"])
    home = workdir / "home"
    home.mkdir(exist_ok=True)
    if data_dir is None:  # as after a first run: a data directory dsh has to create says so on stderr (issue 43)
        (workdir / "dsh-data").mkdir(exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": os.pathsep.join(paths),
        "PYTHONUNBUFFERED": "1",
        "LANG": "C.UTF-8",
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "DSH_DATA_DIR": str(data_dir if data_dir is not None else workdir / "dsh-data"),
        "DSH_MODEL": model,
        "DSH_LOG_LEVEL": "warning",
        "DSH_LSP": "off",  # no language servers in unrelated tests (RFC 0037); tests/lsp sets it back
    }
    plugins = list(plugins)
    if plugins:
        env["DSH_PLUGINS"] = ",".join(plugins)
    env.update(extra or {})
    return env


def write_script(path: Path, steps: list[dict[str, Any]]) -> str:
    """Write a scripted-model script (JSON) to *path*; return the model name ``scripted:<path>`` that replays it."""
    path.write_text(json.dumps(steps), encoding="utf-8")
    return f"scripted:{path}"


def approved_commands_unconfined(env: Mapping[str, str]) -> Mapping[str, str]:
    """Write the configuration file of *env* (``$XDG_CONFIG_HOME/dsh/config.yaml``) with
    ``sandbox: {approved: off}`` and return *env*: approved commands then go to the client's terminal
    (``terminal/create``) when it offers one, as they did before the sandbox (RFC 0028: confined commands always
    run locally, since an editor's process cannot be confined). For tests of that client-terminal path."""
    config = Path(env["XDG_CONFIG_HOME"]) / "dsh" / "config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("sandbox:\n  approved: off\n")  # YAML false, read as \"off\"
    return env
