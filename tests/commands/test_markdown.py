"""User commands from Markdown files, and recognising a command in a prompt (pure, no daemon)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from dsh.commands import Command, CommandResult, match_command
from dsh.commands._markdown import expand, markdown_commands, parse_command_file, project_dirs


async def _noop(invocation: Any) -> CommandResult:
    return CommandResult(text="")


HELP = Command("help", "List the commands", _noop)
MODEL = Command("model", "Switch", _noop, "[model id]")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/help", ("help", "")),
        ("  /help  ", ("help", "")),
        ("/model   openai:gpt-4.1 ", ("model", "openai:gpt-4.1")),
        ("/model\nfirst\nsecond", ("model", "first\nsecond")),
        ("/helpme", None),
        ("/usr/bin/env", None),
        ("/unknown thing", None),
        ("help", None),
        ("please /help", None),
        ("/help/x", None),
    ],
)
def test_a_command_is_its_registered_name_then_whitespace_or_the_end(
    text: str, expected: tuple[str, str] | None
) -> None:
    found = match_command([{"type": "text", "text": text}], [HELP, MODEL])
    assert (None if found is None else (found[0].name, found[1])) == expected


def test_only_a_leading_text_block_can_be_a_command() -> None:
    link = {"type": "resource_link", "uri": "file:///help", "name": "/help"}
    assert match_command([link, {"type": "text", "text": "/help"}], [HELP]) is None
    assert match_command([], [HELP]) is None


def test_expand_substitutes_arguments_and_positionals() -> None:
    body = "Review $1 against $2 ($ARGUMENTS); missing: [$3] [$9]"
    assert expand(body, "a.py  b.py") == "Review a.py against b.py (a.py  b.py); missing: [] []"


def test_front_matter_is_optional_and_must_close() -> None:
    assert parse_command_file("just text $ARGUMENTS") == ({}, "just text $ARGUMENTS")
    front, body = parse_command_file("---\ndescription: Review a file\nargument-hint: <path>\n---\nBody\n")
    assert front == {"description": "Review a file", "argument-hint": "<path>"}
    assert body == "Body\n"
    with pytest.raises(ValueError, match="not closed"):
        parse_command_file("---\ndescription: x\n")
    with pytest.raises(ValueError, match="mapping"):
        parse_command_file("---\n- a list\n---\nbody")


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_project_files_from_cwd_up_to_the_repository_root_shadow_user_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    nested = repo / "pkg" / "sub"
    nested.mkdir(parents=True)
    _write(tmp_path / ".dsh" / "commands" / "outside.md", "above the repository")
    _write(repo / ".dsh" / "commands" / "review.md", "---\ndescription: root review\n---\nroot $ARGUMENTS")
    _write(nested / ".dsh" / "commands" / "review.md", "---\ndescription: nested review\n---\nnested $ARGUMENTS")
    _write(repo / ".dsh" / "commands" / "deploy.md", "deploy")
    _write(tmp_path / "config" / "dsh" / "commands" / "deploy.md", "---\ndescription: user deploy\n---\nuser")
    _write(tmp_path / "config" / "dsh" / "commands" / "mine.md", "---\ndescription: mine\n---\nmine")
    _write(repo / ".dsh" / "commands" / "broken.md", "---\ndescription: [unclosed\n---\nbody")
    _write(repo / ".dsh" / "commands" / "bad name!.md", "ignored: not a command name")

    assert project_dirs(str(nested)) == [nested, nested.parent, repo]
    found = {c.name: c for c in markdown_commands(str(nested))}
    assert sorted(found) == ["deploy", "mine", "review"]
    assert found["review"].description == "nested review" and found["review"].origin == "project"
    assert found["deploy"].origin == "project"
    assert found["mine"].origin == "user"


def test_without_a_repository_only_the_session_directory_is_searched(tmp_path: Path) -> None:
    assert project_dirs(str(tmp_path / "a" / "b")) == [tmp_path / "a" / "b"]


def test_a_broken_file_is_skipped_with_one_log_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    broken = tmp_path / ".dsh" / "commands" / "broken.md"
    _write(broken, "---\ndescription: x\n")
    _write(tmp_path / ".dsh" / "commands" / "fine.md", "fine")
    with capture_logs() as logs:
        assert [c.name for c in markdown_commands(str(tmp_path))] == ["fine"]
    assert [(entry["event"], entry["path"]) for entry in logs] == [("skipped a command file", str(broken))]
