"""``python -m dsh.sandbox``: what an editor's terminal runs for a sandboxed command confines itself exactly as a
forked child would, then runs the command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dsh.sandbox import support
from tests.support.env import SRC

pytestmark = pytest.mark.skipif(not support().available, reason="this machine offers no Landlock")


def launch(tmp_path: Path, level: str, script: str) -> subprocess.CompletedProcess[str]:
    machine = support()
    project, tmp = tmp_path / "project", tmp_path / "tmp"
    project.mkdir(exist_ok=True)
    tmp.mkdir(exist_ok=True)
    argv = [sys.executable, "-m", "dsh.sandbox", "--level", level, "--tmp", str(tmp), "--abi", str(machine.abi)]
    argv += ["--namespaces" if machine.namespaces else "--no-namespaces", "--no-network", "--root", str(project)]
    return subprocess.run(
        [*argv, "--", "bash", "-c", script],
        cwd=project,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(SRC)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_read_only_writes_only_its_temporary_directory(tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("SECRET-OUTSIDE\n", encoding="utf-8")
    done = launch(
        tmp_path, "read-only", f'echo x > made.txt; cat {tmp_path / "outside.txt"}; touch "$TMPDIR/t" && echo tmp-ok'
    )
    assert "tmp-ok" in done.stdout
    assert "SECRET-OUTSIDE" not in done.stdout
    assert not (tmp_path / "project" / "made.txt").exists()
    assert (tmp_path / "tmp" / "t").exists()


def test_workspace_write_writes_in_the_root_only(tmp_path: Path) -> None:
    done = launch(tmp_path, "workspace-write", f"echo x > made.txt; echo y > {tmp_path / 'out.txt'}; echo done")
    assert "done" in done.stdout
    assert (tmp_path / "project" / "made.txt").read_text(encoding="utf-8") == "x\n"
    assert not (tmp_path / "out.txt").exists()


def test_the_git_environment_is_set(tmp_path: Path) -> None:
    done = launch(tmp_path, "read-only", 'echo "$GIT_CONFIG_KEY_0=$GIT_CONFIG_VALUE_0 pager=$GIT_PAGER"')
    assert "core.fsmonitor=false pager=cat" in done.stdout
