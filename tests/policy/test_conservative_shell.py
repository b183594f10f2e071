"""The conservative shell reading (issue #33 items 2 and 3, RFC 0029), as pure logic: what the parser cannot read
exactly asks; flags by allow-list; redirects are writes; paths outside the roots ask; every node kind of the
grammar is known; long, deep and control-character input; remembered rules mean what the user saw."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from dsh.policy import (
    CallFacts,
    Rule,
    SessionPolicy,
    _shell,
    escape_control,
    is_read_only,
    split_command,
    split_command_async,
)
from dsh.policy._shell import command_paths

CWD = "/project"


def read_only(command: str) -> bool:
    split = split_command(command)
    return not split.opaque and all(is_read_only(part) for part in split.commands)


def run(command: str, cwd: str = CWD, outside: tuple[str, ...] = ()) -> CallFacts:
    return CallFacts("run_command", "execute", cwd, command=command, outside=outside)


@pytest.mark.parametrize(
    "command",
    [
        "cat <<EOF > ../x\nhi\nEOF",
        "cat <<EOF\n$(rm y)\nEOF",
        "cat <<< hi",
        "ls >&out",
        "ls <>f",
        "ls 3<>f",
        "cat a >| b",
        "cat a &>> b",
        "cat a 2> err",
        "ls > /dev/nullx",
        "{ ls; } > out",
    ],
)
def test_every_redirect_that_may_write_is_a_write(command: str) -> None:
    assert not read_only(command)


@pytest.mark.parametrize("command", ["ls 2>&1", "ls >/dev/null 2>&1", "ls 2>&-", 'ls > "/dev/null"', "cat < a.txt"])
def test_descriptors_dev_null_and_input_files_do_not_write(command: str) -> None:
    assert read_only(command)


@pytest.mark.parametrize(
    "command",
    [
        "find . $'-delete'",
        'find . $"-delete"',
        "find . ${PWD:+-delete}",
        "find . $X",
        "find . -{delete,name}",
        "find . -name x {-delete,}",
        "find . $(echo -delete)",
        "find . `echo -delete`",
        "cat $(ls)",
        "cat <(ls)",
        "ls $((1+1))",
        "cat ~root/.ssh/id_rsa",
        "cat *",
        "cat .*",
        "rg foo *.py",
        "cat src/.*",
    ],
)
def test_a_word_that_is_not_static_is_never_read_only(command: str) -> None:
    assert not read_only(command)


@pytest.mark.parametrize(
    "command",
    [
        "find . -delete",
        "find . -exec rm {} ;",
        "find . -execdir sh ;",
        "find . -ok rm {} ;",
        "find . -fprint out",
        "find . -fprintf out %p",
        "find . -fls out",
        "sort -o out in",
        "sort -uo out in",
        "sort --o=out in",
        "sort --out=out in",
        "sort --output=out in",
        "sort --compress-program=sh in",
        "sort --compress=sh in",
        "sort -T /tmp in",
        "uniq in out",
        "file -C -m magic",
        "file -m magic x",
        "rg --pre sh x",
        "rg --pre=sh x",
        "rg --pr=sh x",
        "rg -z x",
        "rg --search-zip x",
        "rg --hostname-bin=sh x",
        "git diff --output=f",
        "git diff --ext-diff",
        "git diff --no-index a b",
        "git diff --textconv",
        "git log --output=f",
        "git -c core.pager=sh log",
        "git -C /etc status",
        "git --git-dir=x status",
        "git branch new",
        "git push",
        "tree -o out",
        "tree -R -H x",
        "date 0101",
        "date -s now",
        "hostname evil",
        "cd -",
        "tail --follow=name --pid=1 x",
        "cat --show-al x",
        "ls --al",
        "grep -R secret .",
        "grep --dereference-recursive secret .",
        "rg -L secret",
        "rg --follow secret",
        "find -L . -name x",
        "find . -follow",
        "ls -LR",
        "tree -l",
        "du -L .",
        "diff -r a b",
    ],
)
def test_flags_are_matched_by_an_allow_list_parsed_as_the_tool_parses_them(command: str) -> None:
    assert not read_only(command)


@pytest.mark.parametrize(
    "command",
    [
        "ls -la",
        "ls -la --color=auto src",
        "cat -n a b",
        "head -n 5 f",
        "head -n5 f",
        "head -5 f",
        "tail -20 f",
        "wc -l f",
        "grep -rn -e x -- src",
        "grep -C3 foo f",
        "rg -uuu -i foo src",
        "rg --glob '*.py' foo",
        "find . -name '*.py' -type f -print",
        "find src -maxdepth 2 -newer a.txt",
        "sort -u -k2 f",
        "uniq -c f",
        "git status --short",
        "git --no-pager log --oneline -5",
        "git diff --stat HEAD~1",
        "git show HEAD",
        "git branch -a",
        "jq -r .name package.json",
        "date +%s",
        "cat src/*.py",
        r"ls \-la",
        "cd sub && ls",
    ],
)
def test_ordinary_reads_stay_read_only(command: str) -> None:
    assert read_only(command), split_command(command)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("cat ../x", ["/x"]),
        ("cat /etc/passwd", ["/etc/passwd"]),
        ("cd .. && cat x", ["/", "/x"]),
        ("cd /etc", ["/etc"]),
        ("cat ~/.ssh/id_rsa", ["/home/u/.ssh/id_rsa"]),
        ("cd", ["/home/u"]),
        ("grep -f ../patterns x", ["/patterns"]),
        ("grep -r foo /etc", ["/etc"]),
        ("wc --files0-from=../list", ["/list"]),
        ("find / -name x", ["/"]),
        ("find . -newer ../x", ["/x"]),
        ("cat ../*", ["/"]),
        ("cat < ../secret", ["/secret"]),
        ("jq . ../x.json", ["/x.json"]),
        ("git log -- ../elsewhere", ["/elsewhere"]),
        ("(cd sub) && cat ../../x", ["/x"]),
    ],
)
def test_the_paths_a_read_only_command_reads_are_known(command: str, expected: list[str]) -> None:
    paths = command_paths(split_command(command), CWD, "/home/u")
    outside = [path for path in paths if not (path == CWD or path.startswith(CWD + "/"))]
    assert set(expected) <= set(outside), paths


def test_patterns_are_not_paths() -> None:
    assert command_paths(split_command("grep /etc f"), CWD, "/h") == ("/project/f",)
    assert command_paths(split_command("jq '.a/.b' x.json"), CWD, "/h") == ("/project/x.json",)


def test_a_command_reading_outside_the_roots_asks_with_no_always() -> None:
    decision = SessionPolicy("accept-edits").decide(run("cat ../x", outside=("/x",)))
    assert (decision.verdict, decision.always) == ("ask", False)
    reads_anywhere = SessionPolicy(reads_anywhere=True).decide(run("cat ../x", outside=("/x",)))
    assert reads_anywhere.verdict == "ask"  # --allow-reads is for the read tools, never for commands


def test_every_node_kind_of_the_grammar_is_known() -> None:
    import tree_sitter_bash
    from tree_sitter import Language

    language = Language(tree_sitter_bash.language())
    kinds = {
        language.node_kind_for_id(i)
        for i in range(language.node_kind_count)
        if language.node_kind_is_named(i) and language.node_kind_is_visible(i)
    }
    assert kinds - _shell.KNOWN_KINDS == set(), "a node kind of the grammar has no rule in dsh.policy._shell"
    assert "word" in kinds and "heredoc_redirect" in kinds


@pytest.mark.parametrize(
    ("kind", "command"),
    [("ansi_c_string", "ls $'x'"), ("word", "ls"), ("heredoc_redirect", "cat <<EOF\nx\nEOF"), ("list", "ls && ls")],
)
def test_a_node_kind_the_code_does_not_know_asks(monkeypatch: pytest.MonkeyPatch, kind: str, command: str) -> None:
    monkeypatch.setattr(_shell, "KNOWN_KINDS", _shell.KNOWN_KINDS - {kind})
    monkeypatch.setattr(_shell, "_CONTAINERS", _shell._CONTAINERS - {kind})
    monkeypatch.setattr(_shell, "_STATIC_WORDS", _shell._STATIC_WORDS - {kind})
    monkeypatch.setattr(_shell, "_REDIRECTS", _shell._REDIRECTS - {kind})
    split = _shell._split(command)
    assert split.opaque, (kind, split)
    assert not SessionPolicy().decide(run(command)).always


def test_long_lines_and_control_characters_are_opaque_with_no_always() -> None:
    long = "ls " + "a " * 40_000
    for command, reason in [
        (long, "longer than 64 KiB"),
        ("ls \x1b[2K", "control"),
        ("ls\rrm -rf x", "control"),
        ("ls \u202erm", "control"),
        ("ls \x00", "control"),
    ]:
        split = split_command(command)
        assert split.opaque and reason in split.reason, (command[:20], split.reason)
        decision = SessionPolicy("accept-edits").decide(run(command))
        assert (decision.verdict, decision.always) == ("ask", False)
        assert reason in decision.why


def test_deep_nesting_gives_a_clear_answer_not_a_recursion_error() -> None:
    deep = "echo " + "$(" * 5000 + "x" + ")" * 5000
    split = split_command(deep)
    assert split.opaque and "levels deep" in split.reason
    decision = SessionPolicy().decide(run(deep))
    assert decision.verdict == "ask" and "levels deep" in decision.why
    quoted = 'ls "' + "$(echo " * 3000 + "x" + ")" * 3000 + '"'
    assert "levels deep" in split_command(quoted).reason


async def test_the_split_runs_in_a_worker_thread_and_a_megabyte_never_holds_the_loop() -> None:
    seen: list[str] = []
    original = _shell.split_command

    def recording(command: str) -> _shell.ShellSplit:
        seen.append(threading.current_thread().name)
        return original(command)

    _shell._CACHE.clear()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_shell, "split_command", recording)
        ticks = 0
        done = anyio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await anyio.lowlevel.checkpoint()

        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                group.start_soon(ticker)
                split = await split_command_async("ls " + "a " * 500_000)
                done.set()
    assert split.opaque and "64 KiB" in split.reason
    assert seen and seen[0] != threading.main_thread().name
    assert threading.current_thread() is threading.main_thread()
    started = time.perf_counter()
    assert (await split_command_async("git status")).commands  # a miss: a thread; then cached
    assert (await split_command_async("git status")).commands
    assert time.perf_counter() - started < 30


def test_control_characters_are_escaped_for_people() -> None:
    assert escape_control("ls \x1b[2K\rrm -rf ~\u202e") == "ls \\x1b[2K\\x0drm -rf ~\\u202e"
    assert escape_control("ls\nrm", newlines=True) == "ls\\x0arm"
    assert escape_control("ls\nrm") == "ls\nrm"
    assert escape_control("a\\x1b \x1b") == "a\\\\x1b \\x1b"  # a literal backslash cannot pass for an escape


# -- remembered rules mean what the user saw (item 3) -------------------------------------------------------------


def test_a_prefix_rule_never_covers_a_write_by_redirection() -> None:
    policy = SessionPolicy()
    asked = policy.decide(run("cat a > b"))
    assert asked.verdict == "ask" and asked.always is False  # nothing honest to remember for a redirected write
    policy.rules.append(Rule("run_command", "cat", "allow"))
    assert policy.decide(run("cat a")).verdict == "allow"
    assert policy.decide(run("cat a > ../outside/authorized_keys")).verdict == "ask"
    assert policy.decide(run("cat a >> b")).verdict == "ask"
    mixed = policy.decide(run("npm test > log.txt && make"))
    assert mixed.scopes == ("make",)  # the "always" covers the part without a redirection only


def test_deny_and_ask_rules_still_match_redirected_parts() -> None:
    policy = SessionPolicy(rules=[Rule("run_command", "rm", "deny", "config")])
    assert policy.decide(run("rm x > /dev/null 2> log")).verdict == "refuse"


def test_path_scopes_match_real_paths_of_target_and_scope(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "secret").mkdir()
    os.symlink(project / "secret", project / "src" / "link")

    def write(path: Path) -> CallFacts:
        return CallFacts("write_file", "edit", str(project), paths=(str(path),))

    policy = SessionPolicy(rules=[Rule("write_file", str(project / "src"), "allow")])
    assert policy.decide(write(project / "src" / "a.py")).verdict == "allow"
    assert policy.decide(write(project / "src" / "link" / "key")).verdict == "ask"
    globbed = SessionPolicy(rules=[Rule("write_file", "src/**", "allow", "config")])
    assert globbed.decide(write(project / "src" / "b" / "c.py")).verdict == "allow"
    assert globbed.decide(write(project / "src" / "link" / "key")).verdict == "ask"
    denied = SessionPolicy("accept-edits", [Rule("write_file", "secret/**", "deny", "config")])
    assert denied.decide(write(project / "src" / "link" / "key")).verdict == "refuse"  # deny: either spelling


@pytest.mark.parametrize("mode", ["default", "accept-edits"])
@pytest.mark.parametrize(
    "path", [".git/config", ".git/hooks/pre-commit", "sub/.git", ".gitattributes", "a/.gitattributes"]
)
def test_edits_of_git_control_files_ask_in_every_mode(mode: str, path: str) -> None:
    rules = [Rule("write_file", CWD, "allow")]  # even an "always allow write_file in ." does not reach them
    decision = SessionPolicy(mode, rules).decide(CallFacts("write_file", "edit", CWD, paths=(f"{CWD}/{path}",)))
    assert (decision.verdict, decision.always) == ("ask", False)
    assert SessionPolicy("plan").decide(CallFacts("write_file", "edit", CWD, paths=(f"{CWD}/{path}",))).verdict == (
        "refuse"
    )
