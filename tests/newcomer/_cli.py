"""``dsh`` run as a person runs it from a shell, for the first-hour tests (issue 43)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.env import sandbox_env

WAIT = 60


def dsh(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, **extra: str
) -> subprocess.CompletedProcess[str]:
    """``python -m dsh ARGS`` in *tmp_path*, stdin at its end, with *env* (default: the sandbox's, plus *extra*)."""
    return subprocess.run(
        [sys.executable, "-m", "dsh", *args],
        env=env if env is not None else sandbox_env(tmp_path, "echo", extra=extra),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=WAIT,
        cwd=tmp_path,
    )
