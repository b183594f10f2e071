"""Migration from the old rule dialect (RFC 0041): which configured rules changed meaning, and the daemon says so
once (a warning at start-up, one notice at the first turn), over the wire."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dsh.policy._migration import meaning_changes
from dsh.policy._rules import parse_pattern
from tests.support.acp_schema import modern_client


def _changes(pattern: str, decision: str = "allow") -> list[str]:
    return meaning_changes([parse_pattern(pattern, decision)])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("pattern", "said"),
    [
        ("edit_file(*.md)", "every depth"),
        ("read_file(.env)", "write ./.env for the old meaning"),
        ("edit_file(docs/{a,b}.md)", "alternatives"),
        ("edit_file(!secrets/**)", "complement"),
        ("edit_file(src\\gen\\**)", "separator"),
        ("edit_file(src/*)", "inside the directories it matches"),
        ("edit_file(src/a**b)", "** inside a name"),
    ],
)
def test_a_rule_whose_meaning_moved_is_named_with_the_way_back(pattern: str, said: str) -> None:
    changes = _changes(pattern)
    assert len(changes) == 1 and changes[0].startswith(f"allow {parse_pattern(pattern, 'allow').pattern()}: ")
    assert said in changes[0]


@pytest.mark.parametrize(
    "pattern",
    [
        "edit_file(src/**)",
        "edit_file(/etc/**)",
        "edit_file(~/notes/**)",
        "edit_file(src/gen)",
        "edit_file(**)",
        "edit_file(.)",
        "run_command(npm test)",
        "run_command(rm *.md)",
        "fetch_url(*.example.com)",
        "edit_file",
    ],
)
def test_rules_that_mean_what_they_meant_are_not_mentioned(pattern: str) -> None:
    assert _changes(pattern) == []


def test_the_old_meaning_written_the_new_way_covers_the_same_files() -> None:
    """The way back each line proposes (./NAME) is the old meaning for files: top-level only (what it adds, the
    inside of a directory named like a.md, is said too)."""
    assert _changes("edit_file(./*.md)") == [
        "allow edit_file(./*.md): it now also covers what is inside the directories it matches, as .gitignore does"
    ]
    from dsh.policy import CallFacts, SessionPolicy

    policy = SessionPolicy(rules=[parse_pattern("edit_file(./*.md)", "allow")])
    assert policy.decide(CallFacts("edit_file", "edit", "/p", paths=("/p/a.md",))).verdict == "allow"
    assert policy.decide(CallFacts("edit_file", "edit", "/p", paths=("/p/docs/a.md",))).verdict == "ask"


def test_a_pattern_with_dotdot_is_a_config_error() -> None:
    with pytest.raises(ValueError, match=r"\.\."):
        parse_pattern("edit_file(../shared/**)", "allow")
    parse_pattern("run_command(cat ../x)", "allow")  # a command prefix is not a path pattern


def _is_update(kind: str) -> Any:
    def match(message: dict[str, Any]) -> bool:
        return message.get("method") == "session/update" and message["params"]["update"]["sessionUpdate"] == kind

    return match


async def test_the_daemon_says_once_that_a_configured_rule_changed(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("permissions:\n  allow: ['edit_file(*.md)', 'edit_file(src/**)']\n", encoding="utf-8")
    env = {"DSH_CONFIG": str(config)}
    async with modern_client(tmp_path, "echo", env=env) as (client, _):
        first = await client.new_session(tmp_path)
        assert (await client.prompt(first, "one"))["result"]["stopReason"] == "end_turn"
        message = await client.wait_for(_is_update("notice"))
        update = message["params"]["update"]
        assert update["severity"] == "warning" and "glob dialect" in update["title"]
        assert "edit_file(*.md)" in update["description"] and "every depth" in update["description"]
        assert "src/**" not in update["description"]
        assert update["_meta"] == {"dsh": {"source": "policy"}}
        assert (await client.prompt(first, "two"))["result"]["stopReason"] == "end_turn"
        second = await client.new_session(tmp_path)
        assert (await client.prompt(second, "three"))["result"]["stopReason"] == "end_turn"
        said = [u for s in (first, second) for u in client.updates(s) if u["sessionUpdate"] == "notice"]
        assert [u["_meta"]["dsh"]["source"] for u in said].count("policy") == 1  # once per daemon
    assert "glob dialect" in (tmp_path / "stderr.log").read_text(encoding="utf-8")  # and at start-up


def test_config_check_names_the_rules_whose_meaning_moved(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    config = tmp_path / "config.yaml"
    config.write_text("permissions:\n  allow: ['edit_file(src/**)', 'edit_file(*.md)']\n", encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if not key.startswith("DSH_")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    result = subprocess.run(
        [sys.executable, "-m", "dsh", "config", "check", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    notes = [line for line in result.stdout.splitlines() if line.startswith("note: ")]
    assert len(notes) == 1 and notes[0].startswith("note: permission rule allow edit_file(*.md): ")
    assert "write ./*.md for the old meaning" in notes[0]
