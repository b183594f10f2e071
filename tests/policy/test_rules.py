"""The policy as pure logic: shell commands split into simple commands, the read-only set, rules by scope, the
order of the decision (the output budget is the tools', tests/tools/)."""

from __future__ import annotations

import pytest

from dsh.policy import CallFacts, Rule, SessionPolicy, is_read_only, split_command
from dsh.policy._rules import parse_pattern
from dsh.policy._shell import command_prefix

CWD = "/project"


def run(command: str) -> CallFacts:
    return CallFacts("run_command", "execute", CWD, command=command)


def edit(*paths: str, outside: tuple[str, ...] = ()) -> CallFacts:
    return CallFacts("edit_file", "edit", CWD, paths=paths, outside=outside)


@pytest.mark.parametrize(
    ("command", "words", "opaque"),
    [
        ("ls -la", [("ls", "-la")], False),
        ("ls && rm -rf x", [("ls",), ("rm", "-rf", "x")], False),
        ("a || b; c | d & e", [("a",), ("b",), ("c",), ("d",), ("e",)], False),
        ("(cd sub && make)", [("cd", "sub"), ("make",)], False),
        ("echo $(rm x)", [("rm", "x"), ("echo", "$(rm x)")], False),
        ("echo `touch y`", [("touch", "y"), ("echo", "`touch y`")], False),
        ('echo "in $(rm z) string"', [("rm", "z"), ("echo", '"in $(rm z) string"')], False),
        ("cat <(rm w)", [("rm", "w"), ("cat", "<(rm w)")], False),
        ("'git' \"status\"", [("git", "status")], False),
        ("$(rm x)", None, True),  # the command name itself is computed
        ("for f in *; do rm $f; done", None, True),
        ("X=$(rm q)", None, True),
        ("if true; then rm a; fi", None, True),
        ("ls (", None, True),
    ],
)
def test_commands_split_into_every_simple_command(
    command: str, words: list[tuple[str, ...]] | None, opaque: bool
) -> None:
    split = split_command(command)
    assert split.opaque is opaque
    if words is not None:
        assert [c.words for c in split.commands] == words


@pytest.mark.parametrize(
    "command",
    [
        "ls -la",
        "cat a.txt",
        "head -n 5 f",
        "tail f",
        "wc -l f",
        "pwd",
        "rg foo",
        "grep -rn x .",
        "find . -name '*.py'",
        "git status",
        "git diff HEAD~1",
        "git log --oneline -5",
        "git show HEAD",
        "git branch",
        "git branch -a",
        "ls 2>/dev/null",
        "ls 2>&1",
        "cd sub && git --no-pager log -3",
    ],
)
def test_read_only_commands(command: str) -> None:
    split = split_command(command)
    assert not split.opaque and all(is_read_only(c) for c in split.commands)


@pytest.mark.parametrize(
    "command",
    [
        "ls > f",
        "cat a >> b",
        "ls &> out",
        "find . -delete",
        "find . -exec rm {} ;",
        "rg --pre sh x",
        "git branch new-feature",
        "git branch -D main",
        "git push",
        "git diff --output=f",
        "sort -o out in",
        "rm x",
        "FOO=1 ls",
        "bash -c ls",
        "sed -i s/a/b/ f",
    ],
)
def test_commands_that_may_change_something_are_not_read_only(command: str) -> None:
    split = split_command(command)
    assert split.opaque or not all(is_read_only(c) for c in split.commands)


def test_the_prefix_is_the_command_and_its_subcommand_never_the_arguments() -> None:
    def prefix(command: str) -> tuple[str, ...]:
        return command_prefix(split_command(command).commands[0])

    assert prefix("npm test -- -k x") == ("npm", "test")
    assert prefix("git diff --stat") == ("git", "diff")
    assert prefix("rm -rf build") == ("rm",)
    assert prefix("python script.py") == ("python",)
    assert prefix("./run.sh all") == ("./run.sh", "all")


def test_default_mode_allows_reads_and_read_only_commands_and_asks_for_the_rest() -> None:
    policy = SessionPolicy()
    assert policy.decide(CallFacts("read_file", "read", CWD, paths=("/project/a",))).verdict == "allow"
    assert policy.decide(run("git status && ls")).verdict == "allow"
    asked = policy.decide(run("ls && npm test && rm -rf x"))
    assert (asked.verdict, asked.scopes, asked.always) == ("ask", ("npm test", "rm"), True)
    opaque = policy.decide(run("$(rm x)"))
    assert (opaque.verdict, opaque.always) == ("ask", False)
    assert policy.decide(edit("/project/src/a.py")).scopes == ("/project/src",)


def test_a_command_prefix_rule_covers_that_command_only() -> None:
    policy = SessionPolicy(rules=[Rule("run_command", "npm test", "allow")])
    assert policy.decide(run("npm test")).verdict == "allow"
    assert policy.decide(run("npm test -- -k x")).verdict == "allow"
    assert policy.decide(run("npm testing")).verdict == "ask"
    assert policy.decide(run("npm test && rm -rf build")).verdict == "ask"
    assert policy.decide(run("rm -rf build")).verdict == "ask"


def test_deny_wins_over_allow_and_over_bypass() -> None:
    rules = [parse_pattern("run_command(rm)", "deny"), parse_pattern("run_command", "allow")]
    for mode in ("default", "bypass", "accept-edits"):
        policy = SessionPolicy(mode, list(rules))
        decision = policy.decide(run("ls && rm -rf x"))
        assert decision.verdict == "refuse", mode
        assert "run_command(rm)" in decision.why
    assert SessionPolicy("bypass", list(rules)).decide(run("ls")).verdict == "allow"


def test_an_ask_pattern_asks_even_for_a_read_only_command() -> None:
    policy = SessionPolicy(rules=[parse_pattern("run_command(git log:*)", "ask")])
    assert policy.decide(run("git log -1")).verdict == "ask"
    assert policy.decide(run("git status")).verdict == "allow"


def test_path_rules_match_a_directory_or_a_glob_relative_to_the_session() -> None:
    policy = SessionPolicy(
        rules=[parse_pattern("edit_file(src/**)", "allow"), parse_pattern("edit_file(*.md)", "deny")]
    )
    assert policy.decide(edit("/project/src/a/b.py")).verdict == "allow"
    assert policy.decide(edit("/project/tests/a.py")).verdict == "ask"
    assert policy.decide(edit("/project/README.md")).verdict == "refuse"
    assert policy.decide(edit("/project/src/../srcx/a.py")).verdict == "ask"
    session = SessionPolicy(rules=[Rule("edit_file", "/project/src", "allow")])
    assert session.decide(edit("/project/src/deep/x.py")).verdict == "allow"
    assert session.decide(edit("/project/srcx/x.py")).verdict == "ask"


def test_outside_paths_ask_unless_a_configured_pattern_names_them() -> None:
    outside = edit("/etc/hosts", outside=("/etc/hosts",))
    assert SessionPolicy("accept-edits").decide(outside).verdict == "ask"
    assert (
        SessionPolicy(rules=[Rule("edit_file", "/etc", "allow")]).decide(outside).verdict == "ask"
    )  # a session answer
    assert SessionPolicy(rules=[parse_pattern("edit_file(/etc/**)", "allow")]).decide(outside).verdict == "allow"
    assert SessionPolicy("plan").decide(CallFacts("read_file", "read", CWD, outside=("/etc/x",))).verdict == "refuse"


def test_modes() -> None:
    assert SessionPolicy("accept-edits").decide(edit("/project/a.py")).verdict == "allow"
    assert SessionPolicy("accept-edits").decide(run("make")).verdict == "ask"
    assert SessionPolicy("plan").decide(edit("/project/a.py")).verdict == "refuse"
    assert SessionPolicy("plan").decide(run("ls")).verdict == "refuse"
    assert SessionPolicy("bypass").decide(run("rm -rf /")).verdict == "allow"


def test_a_legacy_tool_wide_allow_no_longer_covers_commands_or_edits() -> None:
    legacy = [Rule("run_command", None, "allow"), Rule("edit_file", None, "allow")]
    assert SessionPolicy(rules=list(legacy)).decide(run("rm -rf x")).verdict == "ask"
    assert SessionPolicy(rules=list(legacy)).decide(edit("/project/a.py")).verdict == "ask"
    legacy_reject = [Rule("run_command", None, "deny")]
    assert SessionPolicy(rules=legacy_reject).decide(run("ls")).verdict == "refuse"


@pytest.mark.parametrize("text", ["", "run_command(", "run command", "edit_file()", "x(:*)"])
def test_bad_patterns_are_refused_with_a_message(text: str) -> None:
    with pytest.raises(ValueError, match=r"pattern|scope"):
        parse_pattern(text, "allow")


def test_patterns_accept_claude_code_spellings() -> None:
    assert parse_pattern("run_command(npm run test:*)", "allow").scope == "npm run test"
    assert parse_pattern("run_command(git diff *)", "allow").scope == "git diff"
    assert parse_pattern("read_file", "deny") == Rule("read_file", None, "deny", "config")
