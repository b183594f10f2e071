"""The one glob dialect (RFC 0041), as a table: each row a pattern, a path and whether the pattern covers it,
relative patterns relative to the base ``/p``. The same table drives a permission rule and the glob tool
(tests/globs/test_same_files.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dsh.globs import GlobError, compile_glob
from dsh.globs._glob import MAX_ALTERNATIVES, MAX_STARS

BASE = "/p"
HOME = os.path.expanduser("~")

CORPUS: list[tuple[str, str, bool]] = [
    # `*` stays within one segment; a pattern without "/" matches at any depth (git, ripgrep)
    ("*.md", "/p/a.md", True),
    ("*.md", "/p/docs/deep/a.md", True),
    ("*.md", "/p/a.mdx", False),
    ("src/*.py", "/p/src/a.py", True),
    ("src/*.py", "/p/src/x/a.py", False),
    ("src/*.py", "/p/lib/src/a.py", False),  # a "/" inside anchors the pattern at the base
    ("README.md", "/p/README.md", True),
    ("README.md", "/p/pkg/README.md", True),
    # `**`
    ("**/*.py", "/p/a.py", True),
    ("**/*.py", "/p/a/b/c.py", True),
    ("src/**", "/p/src/a/b.py", True),
    ("src/**", "/p/srcx/a.py", False),
    ("src/**/test_*.py", "/p/src/test_a.py", True),
    ("src/**/test_*.py", "/p/src/x/y/test_a.py", True),
    ("src/**/test_*.py", "/p/src/x/y/a_test.py", False),
    ("**", "/p/any/thing", True),
    # a pattern that names a directory covers what is inside it (.gitignore's reading)
    ("src", "/p/src/deep/a.py", True),
    ("src", "/p/lib/src/a.py", True),
    ("src/*", "/p/src/a/b.py", True),
    ("docs/", "/p/x/docs/a.md", True),
    ("docs/", "/p/docs", False),  # a trailing "/" names directories: a file "docs" is not one
    (".", "/p/any/thing", True),
    # `./` and a leading `/`: anchored (./ at the base, / at the file system's root)
    ("./*.md", "/p/a.md", True),
    ("./*.md", "/p/docs/a.md", False),
    ("./README.md", "/p/pkg/README.md", False),
    ("/*.md", "/a.md", True),
    ("/*.md", "/p/a.md", False),
    ("/etc/**", "/etc/hosts", True),
    ("//etc/**", "/etc/hosts", True),  # Claude Code's spelling of an absolute path
    ("~/notes/*.md", os.path.join(HOME, "notes", "a.md"), True),
    ("~/notes/*.md", "/p/notes/a.md", False),
    # `{a,b}`, `[abc]`, `?`
    ("*.{md,txt}", "/p/x/notes.txt", True),
    ("*.{md,txt}", "/p/notes.rst", False),
    ("{src,lib}/*.py", "/p/lib/a.py", True),
    ("{src,lib}/*.py", "/p/bin/a.py", False),
    ("{docs/*.md,*.txt}", "/p/deep/a.txt", True),  # each alternative anchored on its own
    ("{docs/*.md,*.txt}", "/p/deep/docs/a.md", False),
    ("file?.[ch]", "/p/file1.c", True),
    ("file?.[ch]", "/p/file1.o", False),
    ("file?.[!ch]", "/p/file1.c", False),
    ("file?.[!ch]", "/p/file1.o", True),
    ("[ab].md", "/p/a.md", True),
    ("[ab].md", "/p/[ab].md", False),
    ("[*].md", "/p/*.md", True),  # brackets quote a wildcard
    ("a[[]1].md", "/p/a[1].md", True),
    # `!`: the complement, inside the base only
    ("!*.md", "/p/src/a.py", True),
    ("!*.md", "/p/src/a.md", False),
    ("!*.md", "/elsewhere/a.py", False),
    ("!src/**", "/p/lib/a.py", True),
    ("!src/**", "/p/src/a.py", False),
    # dotfiles: `*` matches a leading dot, as in .gitignore
    ("*", "/p/.env", True),
    ("*.env", "/p/.env", True),  # `*` may match nothing: a deny of *.env covers .env
    (".env", "/p/deep/.env", True),
    ("*.yml", "/p/.github/workflows/ci.yml", True),
    # case-sensitive
    ("*.MD", "/p/a.md", False),
    ("readme.md", "/p/README.md", False),
    # Windows separators in a pattern are separators
    ("src\\*.py", "/p/src/a.py", True),
    ("src\\**", "/p/src/a/b.py", True),
    # never outside the base: a relative pattern does not reach above it
    ("*.md", "/elsewhere/a.md", False),
    ("**", "/elsewhere/a.md", False),
    ("*", "/p", False),
    ("*.md", "/p/../elsewhere/a.md", False),
    ("src/**", "/p/src/../../etc/passwd", False),
]


@pytest.mark.parametrize(("pattern", "path", "covered"), CORPUS)
def test_the_dialect(pattern: str, path: str, covered: bool) -> None:
    assert compile_glob(pattern).covers(path, BASE) is covered


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        ("../shared/**", "'..'"),
        ("src/../../**", "'..'"),
        ("/etc/../root/**", "'..'"),
        ("", "empty"),
        ("!", "negates"),
        ("{!a,b}", "negates only the whole pattern"),
        ("*" + "a*" * MAX_STARS, "at most"),
        ("{a,b}" * 7, f"more than {MAX_ALTERNATIVES} alternatives"),
        ("x" * 5000, "too long"),
    ],
)
def test_refused_patterns_say_why(pattern: str, why: str) -> None:
    with pytest.raises(GlobError, match=why):
        compile_glob(pattern)


def test_a_pattern_compiles_once() -> None:
    assert compile_glob("src/**/*.py") is compile_glob("src/**/*.py")


def test_matching_stays_fast_on_a_crafted_name() -> None:
    """The most `*` a segment may hold cannot make the matcher backtrack for long: a crafted 255-character name
    against the worst allowed pattern is a hang check, not a latency figure (generous bound)."""
    import time

    glob = compile_glob("*a" * MAX_STARS + "b")
    start = time.perf_counter()
    for _ in range(10):
        assert not glob.covers("/p/" + "a" * 255, BASE)
    assert time.perf_counter() - start < 30


def test_ripgrep_globs_anchor_at_the_search_directory() -> None:
    assert compile_glob("*.md").ripgrep_globs() == ("*.md", "**/*.md/**")
    assert compile_glob("a/*.py").ripgrep_globs("src") == ("/src/a/*.py", "/src/a/*.py/**")
    assert compile_glob("docs/").ripgrep_globs() == ("**/docs/**",)
    assert compile_glob("!*.md").ripgrep_globs() is None
    assert compile_glob("/etc/*").ripgrep_globs() is None


def test_resolved_replaces_the_literal_head_with_its_real_path(tmp_path: Path) -> None:
    """The symlink check of an allow rule: a pattern whose literal directories are links covers the real files
    (as the old rules did), and a real directory name holding wildcard characters stays literal."""
    real = tmp_path / "real [1]"
    (real / "deep").mkdir(parents=True)
    (tmp_path / "src").symlink_to(real)
    base = str(tmp_path)
    resolved = compile_glob("src/**/*.py").resolved(base, os.path.realpath)
    assert resolved.covers(str(real / "deep" / "a.py"), base)
    assert not resolved.covers(str(tmp_path / "real 1" / "deep" / "a.py"), base)  # [1] was quoted, not a class
    assert compile_glob("*.py").resolved(base, os.path.realpath) == compile_glob("*.py")  # no head: unchanged
    assert compile_glob(f"{tmp_path}/src/*").resolved(base, os.path.realpath).covers(str(real / "x"), "/")


def test_a_remembered_directory_is_literal_whatever_its_name() -> None:
    """An "always allow" answer stored the directory it named; a name with glob characters keeps meaning that
    directory (never its look-alikes), and still covers what is below it."""
    from dsh.policy import CallFacts, Rule, SessionPolicy

    def verdict(scope: str, path: str) -> str:
        policy = SessionPolicy(rules=[Rule("edit_file", scope, "allow")])
        return policy.decide(CallFacts("edit_file", "edit", BASE, paths=(path,))).verdict

    assert verdict("/p/src/{a,b}", "/p/src/{a,b}/x.py") == "allow"
    assert verdict("/p/src/{a,b}", "/p/src/a/x.py") == "ask"
    assert verdict("/p/*", "/p/*/x.py") == "allow"
    assert verdict("/p/*", "/p/x.py") == "ask"
    assert verdict("/p/[x]", "/p/x/y.py") == "ask"


def test_an_allow_glob_through_a_symlinked_directory_keeps_its_meaning(tmp_path: Path) -> None:
    """As before the dialect: a rule's literal directories are resolved for the symlink check, so `src/**` where
    `src` is a link still allows the files in it; a link inside `src/` leading elsewhere still asks."""
    from dsh.policy import CallFacts, SessionPolicy
    from dsh.policy._rules import parse_pattern

    real = tmp_path / "real"
    (real / "pkg").mkdir(parents=True)
    (tmp_path / "src").symlink_to(real)
    (tmp_path / "elsewhere").mkdir()
    (real / "out").symlink_to(tmp_path / "elsewhere")
    policy = SessionPolicy(rules=[parse_pattern("edit_file(src/**)", "allow")])

    def verdict(path: Path) -> str:
        return policy.decide(CallFacts("edit_file", "edit", str(tmp_path), paths=(str(path),))).verdict

    assert verdict(tmp_path / "src" / "pkg" / "a.py") == "allow"
    assert verdict(tmp_path / "src" / "out" / "a.py") == "ask"


@pytest.mark.parametrize(("pattern", "path", "covered"), CORPUS)
def test_the_segment_matcher_agrees_with_the_whole_regex(
    pattern: str, path: str, covered: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Patterns whose whole regex could backtrack for long are matched segment by segment: forced here for every
    row of the table, the answer is the same."""
    from dsh.globs import _glob

    monkeypatch.setattr(_glob, "_linear", lambda names, anchored: False)
    _glob._compiled.cache_clear()
    _glob.compile_glob.cache_clear()
    try:
        glob = compile_glob(pattern)
        assert all(a.segments is not None or a.regex is None for a in glob.alternatives)
        assert glob.covers(path, BASE) is covered
    finally:
        _glob._compiled.cache_clear()
        _glob.compile_glob.cache_clear()


@pytest.mark.parametrize(
    "pattern", ["**/a/**/a/**/b", "**/*a*/*a*/*a*/b", "*a*/**/*a*/b", "**/*a*a/*a*a/b", "a/**/*a*/**/b"]
)
def test_no_pattern_backtracks_for_long_on_a_crafted_path(pattern: str) -> None:
    """Patterns that made the whole regex take 1-80 s against a crafted path of Linux's maximum length: a hang
    check with a generous bound (each took well under a second on a loaded machine)."""
    import time

    glob = compile_glob(pattern)
    paths = ["/p/" + "/".join(["a" * 30] * 130), "/p/" + "/".join(["a"] * 2000), "/p/" + "/".join(["a" * 254] * 16)]
    start = time.perf_counter()
    for path in paths:
        assert not glob.covers(path, BASE)
    assert time.perf_counter() - start < 30


def test_a_path_no_file_can_have_is_never_allowed_and_always_denied() -> None:
    from dsh.policy import CallFacts, SessionPolicy
    from dsh.policy._rules import parse_pattern

    long = "/p/" + "a" * 300 + "/x.md"
    for decision, verdict in (("allow", "ask"), ("deny", "refuse")):
        policy = SessionPolicy(rules=[parse_pattern("edit_file(**/a/**/b)", decision)])  # type: ignore[arg-type]
        assert policy.decide(CallFacts("edit_file", "edit", BASE, paths=(long,))).verdict == verdict
