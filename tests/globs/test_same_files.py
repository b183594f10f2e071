"""The same pattern means the same files in a permission rule, the glob tool and grep's filter (both engines):
one real tree, every pattern of a table, four answers compared."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh.policy import CallFacts, SessionPolicy
from dsh.policy._rules import parse_pattern
from dsh.tools._search import GrepQuery, glob_files, grep_python, grep_ripgrep, ripgrep_path

FILES = [
    "README.md",
    "notes.txt",
    "a.py",
    "docs/guide.md",
    "docs/deep/api.md",
    "src/app.py",
    "src/util.py",
    "src/pkg/mod.py",
    "src/pkg/test_mod.py",
    "src/x.md/inside.txt",
    "lib/src/other.py",
    "file1.c",
    "file2.o",
]

PATTERNS = [
    "*.md",
    "./*.md",
    "src/*.py",
    "src/**",
    "src/**/test_*.py",
    "**/*.py",
    "src",
    "src/*",
    "docs/",
    "*.{md,txt}",
    "{src,lib}/*.py",
    "file?.[ch]",
    "!*.py",
    "src\\*.py",
    "README.md",
    "*",
]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    for name in FILES:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("needle\n", encoding="utf-8")
    return root


def _by_rule(pattern: str, root: Path) -> set[str]:
    policy = SessionPolicy(rules=[parse_pattern(f"edit_file({pattern})", "deny")])
    return {
        name
        for name in FILES
        if policy.decide(CallFacts("edit_file", "edit", str(root), paths=(str(root / name),))).verdict == "refuse"
    }


def _by_glob_tool(pattern: str, root: Path) -> set[str]:
    found, total = glob_files(pattern, str(root), limit=1000)
    assert total == len(found)
    return {relative for _path, relative in found}


def _by_grep(pattern: str, root: Path) -> set[str]:
    outcome = grep_python(GrepQuery("needle", str(root), str(root), glob=pattern, head_limit=1000), signal=None)
    assert outcome.error is None
    return set(outcome.lines)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_a_rule_the_glob_tool_and_grep_agree(pattern: str, tree: Path) -> None:
    by_rule = _by_rule(pattern, tree)
    assert by_rule, f"{pattern} covers nothing: the table must exercise it"
    assert _by_glob_tool(pattern, tree) == by_rule
    assert _by_grep(pattern, tree) == by_rule


@pytest.mark.skipif(ripgrep_path() is None, reason="ripgrep is not installed")
@pytest.mark.parametrize("pattern", PATTERNS)
async def test_ripgrep_agrees(pattern: str, tree: Path) -> None:
    rg = ripgrep_path()
    assert rg is not None
    query = GrepQuery("needle", ".", str(tree), glob=pattern, head_limit=1000)
    outcome = await grep_ripgrep(rg, query, signal=None)
    assert outcome.error is None
    assert set(outcome.lines) == _by_rule(pattern, tree)


@pytest.mark.skipif(ripgrep_path() is None, reason="ripgrep is not installed")
async def test_ripgrep_reads_the_glob_relative_to_the_searched_path(tree: Path) -> None:
    rg = ripgrep_path()
    assert rg is not None
    query = GrepQuery("needle", "src", str(tree), glob="pkg/*.py", head_limit=1000)
    outcome = await grep_ripgrep(rg, query, signal=None)
    python = grep_python(
        GrepQuery("needle", str(tree / "src"), str(tree), glob="pkg/*.py", head_limit=1000), signal=None
    )
    assert set(outcome.lines) == set(python.lines) == {"src/pkg/mod.py", "src/pkg/test_mod.py"}
