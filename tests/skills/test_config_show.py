"""``dsh config show --skills`` lists the skills a session in a directory offers, with where each comes from;
``dsh config show`` shows the ``skills:`` settings (RFC 0035)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.env import sandbox_env


def _skill(folder: Path, name: str, description: str) -> Path:
    path = folder / name / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\ndescription: {description}\n---\nbody\n", encoding="utf-8")
    return path


def show(tmp_path: Path, config: str, *args: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "config.yaml"
    path.write_text(config)
    return subprocess.run(
        [sys.executable, "-m", "dsh", "config", "show", "--config", str(path), *args],
        env=sandbox_env(tmp_path, "echo") | {"DSH_MODEL": ""},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_config_show_lists_the_skills_with_their_source(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    mine = _skill(project / ".agents" / "skills", "lint-fix", "Fix lint errors.")
    user = _skill(tmp_path / "home" / ".config" / "dsh" / "skills", "notes", "Take notes.")
    claude = _skill(project / ".claude" / "skills", "from-claude", "Claude's skill.")
    done = show(tmp_path, "", "--skills", "--cwd", str(project))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"lint-fix\tproject\t{mine}\tFix lint errors.",
        f"notes\tuser\t{user}\tTake notes.",
    ]
    done = show(tmp_path, "skills: {claude: true}\n", "--skills", "--cwd", str(project))
    assert f"from-claude\tproject\t{claude}\tClaude's skill." in done.stdout.splitlines()
    shown = show(tmp_path, "skills: {claude: true}\n")
    assert shown.returncode == 0 and "skills:" in shown.stdout and "claude: true" in shown.stdout
