"""``dsh prompt`` is gated (issue #21): nobody can be asked, so a call that would ask is refused with a visible
reason unless a flag allows it; read-only commands run; deny patterns hold whatever the flags say. (``dsh prompt``
is ``dsh exec``'s alias, issue #26; ``tests/exec`` tests the same gate through ``dsh exec --json``.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.editor import call
from tests.support.env import sandbox_env, write_script


def prompt(
    tmp_path: Path, project: Path, steps: list[dict[str, object]], *flags: str
) -> subprocess.CompletedProcess[str]:
    model = write_script(tmp_path / "script.json", steps)
    env = sandbox_env(tmp_path, model)
    return subprocess.run(
        [sys.executable, "-m", "dsh", "prompt", "go", *flags],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def project_in(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    return project


def test_a_command_that_would_ask_is_refused_by_default_with_a_visible_reason(tmp_path: Path) -> None:
    project = project_in(tmp_path)
    steps = [
        call("run_command", "c1", command="ls"),
        call("run_command", "c2", command="touch made.txt"),
        call("write_file", "w1", path="w.txt", content="x\n"),
        {"text": "finished"},
    ]
    done = prompt(tmp_path, project, steps)
    assert done.returncode == 1, done.stderr  # a refused call fails the run
    assert not (project / "made.txt").exists() and not (project / "w.txt").exists()
    assert "run_command failed: refused: run_command was not allowed" in done.stderr
    assert "write_file failed: refused: write_file was not allowed" in done.stderr
    assert done.stderr.count("failed: refused") == 2  # the read-only `ls` ran
    assert "--allow-all" in done.stderr and "--allow-edits" in done.stderr
    assert "finished" in done.stdout


def test_the_flags_widen_it(tmp_path: Path) -> None:
    project = project_in(tmp_path)
    steps = [
        call("run_command", "c1", command="touch made.txt"),
        call("write_file", "w1", path="w.txt", content="x\n"),
        {"text": "finished"},
    ]
    edits = prompt(tmp_path, project, steps, "--allow-edits")
    assert (project / "w.txt").exists() and not (project / "made.txt").exists()
    assert "run_command failed: refused" in edits.stderr and "write_file failed: refused" not in edits.stderr
    everything = prompt(tmp_path, project, steps, "--allow-all")
    assert everything.returncode == 0 and "refused" not in everything.stderr, everything.stderr
    assert (project / "made.txt").exists()
    planned = prompt(
        tmp_path,
        project,
        [call("write_file", "w2", path="p.txt", content="x\n"), {"text": "ok"}],
        "--mode",
        "plan",
        "--allow-all",
    )
    assert "Plan mode is on" in planned.stderr and not (project / "p.txt").exists()
    bad = prompt(tmp_path, project, [{"text": "ok"}], "--mode", "yolo")
    assert bad.returncode == 2 and "yolo" in bad.stderr


def test_deny_patterns_hold_with_allow_all(tmp_path: Path) -> None:
    project = project_in(tmp_path)
    config = tmp_path / "config.yaml"
    config.write_text("permissions:\n  deny: ['run_command(touch)']\n", encoding="utf-8")
    steps = [call("run_command", "c1", command="touch made.txt"), {"text": "finished"}]
    done = prompt(tmp_path, project, steps, "--allow-all", "--config", str(config))
    assert not (project / "made.txt").exists()
    assert "denied by the permissions configuration (`run_command(touch)`)" in done.stderr
