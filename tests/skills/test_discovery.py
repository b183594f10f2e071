"""Skill discovery, the skills section and the ``allowed-tools`` narrowing, without a daemon (RFC 0035)."""

from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

from dsh.skills import discover_skills
from dsh.skills._discover import MAX_SKILLS
from dsh.skills._narrow import permits
from dsh.skills._plugin import skills_text


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def skill(folder: Path, name: str, description: str = "Does a thing.", extra: str = "", body: str = "b\n") -> Path:
    return _write(folder / name / "SKILL.md", f"---\nname: {name}\ndescription: {description}\n{extra}---\n{body}")


@pytest.fixture
def user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return tmp_path / "config" / "dsh" / "skills"


def test_sources_and_shadowing(tmp_path: Path, user: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    nested = repo / "pkg"
    nested.mkdir()
    skill(tmp_path / ".agents" / "skills", "above", "Above the repository.")
    skill(repo / ".agents" / "skills", "review", "root agents review")
    skill(nested / ".agents" / "skills", "review", "nested agents review")
    skill(repo / ".dsh" / "skills", "deploy", "dsh deploy")
    skill(repo / ".agents" / "skills", "deploy", "agents deploy")
    skill(repo / ".claude" / "skills", "claude-only", "From Claude's folder.")
    skill(user, "deploy", "user deploy")
    skill(user, "mine", "user mine")
    found = {s.name: s for s in discover_skills(str(nested))}
    assert sorted(found) == ["deploy", "mine", "review"]
    assert found["review"].description == "nested agents review" and found["review"].origin == "project"
    assert found["deploy"].description == "dsh deploy" and found["deploy"].source == ".dsh/skills"
    assert found["mine"].origin == "user"
    with_claude = {s.name for s in discover_skills(str(nested), claude=True)}
    assert "claude-only" in with_claude


def test_each_broken_skill_is_skipped_with_exactly_one_log_line(tmp_path: Path, user: Path) -> None:
    folder = tmp_path / ".agents" / "skills"
    skill(folder, "fine")
    bad = {
        "unclosed": _write(folder / "unclosed" / "SKILL.md", "---\nname: unclosed\ndescription: x\n"),
        "bomb": _write(folder / "bomb" / "SKILL.md", "---\nname: bomb\ndescription: &a [x]\nb: [*a]\n---\n"),
        "deep": _write(
            folder / "deep" / "SKILL.md", "---\nname: deep\ndescription: x\nd: " + "[" * 50 + "]" * 50 + "\n---\n"
        ),
        "mismatch": _write(folder / "mismatch" / "SKILL.md", "---\nname: other\ndescription: x\n---\n"),
        "upper": _write(folder / "Upper" / "SKILL.md", "---\nname: Upper\ndescription: x\n---\n"),
        "nodesc": _write(folder / "nodesc" / "SKILL.md", "---\nname: nodesc\n---\n"),
        "listdesc": _write(folder / "listdesc" / "SKILL.md", "---\nname: listdesc\ndescription: [a]\n---\n"),
        "long": skill(folder, "long", "d" * 1100),
        "huge": skill(folder, "huge", body="x" * (300 * 1024)),
        "binary": folder / "binary" / "SKILL.md",
        "tools": skill(folder, "tools", extra="allowed-tools: {a: 1}\n"),
    }
    bad["binary"].parent.mkdir(parents=True)
    bad["binary"].write_bytes(b"---\nname: binary\ndescription: \xff\xfe\n---\n")
    secret = _write(tmp_path.parent / f"{tmp_path.name}-outside.md", "---\nname: leak\ndescription: x\n---\n")
    (folder / "leak").mkdir()
    (folder / "leak" / "SKILL.md").symlink_to(secret)
    bad["leak"] = folder / "leak" / "SKILL.md"
    (folder / "fifo").mkdir()
    import os

    os.mkfifo(folder / "fifo" / "SKILL.md")
    bad["fifo"] = folder / "fifo" / "SKILL.md"
    (folder / "no-skill-file").mkdir()
    _write(folder / "stray.md", "not a folder")
    with capture_logs() as logs:
        assert [s.name for s in discover_skills(str(tmp_path))] == ["fine"]
    assert sorted(entry["path"] for entry in logs) == sorted(str(path) for path in bad.values())
    assert all(entry["event"] == "skipped a skill" and entry["reason"] for entry in logs)


def test_at_most_max_skills_are_offered(tmp_path: Path, user: Path) -> None:
    folder = tmp_path / ".agents" / "skills"
    for index in range(MAX_SKILLS + 2):
        skill(folder, f"s{index:03d}")
    with capture_logs() as logs:
        assert len(discover_skills(str(tmp_path))) == MAX_SKILLS
    assert len(logs) == 2


def test_the_section_lists_name_and_description_only_in_a_stable_order(tmp_path: Path, user: Path) -> None:
    folder = tmp_path / ".agents" / "skills"
    skill(folder, "b-two", "Second\n  over two lines.", body="SECRET BODY\n")
    skill(folder, "a-one", "First.")
    text = skills_text(discover_skills(str(tmp_path)))
    assert text.splitlines()[-2:] == ["- a-one: First.", "- b-two: Second over two lines."]
    assert "SECRET BODY" not in text
    assert skills_text(discover_skills(str(tmp_path))) == text
    assert skills_text([]) == ""


def test_allowed_tools_parse_as_a_list_or_a_string(tmp_path: Path, user: Path) -> None:
    folder = tmp_path / ".agents" / "skills"
    skill(folder, "s1", extra="allowed-tools: Read, Bash(git status:*) Grep\n")
    skill(folder, "s2", extra="allowed-tools: [read_file, grep]\n")
    skill(folder, "s3")
    found = {s.name: s.allowed_tools for s in discover_skills(str(tmp_path))}
    assert found == {"s1": ("Read", "Bash(git status:*)", "Grep"), "s2": ("read_file", "grep"), "s3": None}


@pytest.mark.parametrize(
    ("tool", "arguments", "allowed"),
    [
        ("read_file", {"path": "a"}, True),
        ("grep", {"pattern": "x"}, True),
        ("skill", {"name": "x"}, True),
        ("write_file", {"path": "a"}, False),
        ("run_command", {"command": "git status"}, True),
        ("run_command", {"command": "git status --short"}, True),
        ("run_command", {"command": "git statusx"}, False),
        ("run_command", {"command": "git status; rm -rf /"}, False),
        ("run_command", {"command": "git status $(rm x)"}, False),
        ("run_command", {"command": "rm -rf /"}, False),
        ("command_output", {"id": "1"}, True),  # reading what an allowed command printed
    ],
)
def test_a_narrowing_only_lets_through_what_the_skill_names(
    tool: str, arguments: dict[str, str], allowed: bool
) -> None:
    assert permits([("Read", "Grep", "Bash(git status:*)")], tool, arguments) is allowed


def test_narrowings_intersect_and_an_unrestricted_bash_allows_its_companions() -> None:
    assert permits([("Bash",)], "command_output", {})
    assert permits([("Read", "Write"), ("read_file",)], "read_file", {})
    assert not permits([("Read", "Write"), ("read_file",)], "write_file", {})
    assert permits([], "write_file", {})
