"""The one glob dialect (RFC 0041), as a table: each row a pattern, a path and whether the pattern covers it,
relative patterns relative to the base ``/p``. The same table drives a permission rule and the glob tool
(tests/globs/test_same_files.py)."""

from __future__ import annotations

import os

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
