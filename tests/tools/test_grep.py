"""grep: the same contract with ripgrep and with the Python fallback (forced by a module switch or an empty
PATH); ripgrep runs under the rules of any command (no inherited stdin, killed on cancel)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest

import dsh.tools._grep as builtin
import dsh.tools._search as search
from dsh.kernel import CancelToken
from dsh.tools._builtin import GREP_MAX_MATCHES
from tests.tools.conftest import Call, text

HAVE_RG = shutil.which("rg") is not None


@pytest.fixture(params=["ripgrep", "python"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Run the test with each engine; the returned list records which engine each grep call used."""
    if request.param == "ripgrep" and not HAVE_RG:
        pytest.skip("ripgrep (rg) is not installed")
    used: list[str] = []
    original = search.grep_ripgrep

    async def spy(*args: Any, **kwargs: Any) -> Any:
        used.append("ripgrep")
        return await original(*args, **kwargs)

    monkeypatch.setattr(builtin, "grep_ripgrep", spy)
    if request.param == "python":
        monkeypatch.setattr(search, "USE_RIPGREP", False)
    return used


def _tree(work: Path) -> None:
    files = {
        "src/app.py": "import os\n\ndef main():\n    print('Hello')\n",
        "src/util.py": "def hello():\n    return 'hello world'\n",
        "docs/guide.md": "Say hello to the guide.\n",
        ".git/HEAD": "hello from git\n",
        "node_modules/lib/index.js": "hello from deps\n",
        ".venv/lib/x.py": "hello from venv\n",
    }
    for name, content in files.items():
        path = work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    (work / "data.bin").write_bytes(b"hello\x00\x01\x02")


async def test_grep_regex_prints_path_line_text(call: Call, work: Path, engine: list[str]) -> None:
    _tree(work)
    result = await call("grep", {"pattern": r"hel+o\b", "output_mode": "content"})
    assert not result.is_error, text(result)
    assert text(result).split("\n") == [
        "docs/guide.md:1:Say hello to the guide.",
        "src/util.py:1:def hello():",
        "src/util.py:2:    return 'hello world'",
    ]
    assert engine == (["ripgrep"] if HAVE_RG and search.USE_RIPGREP else [])


async def test_grep_glob_path_and_case(call: Call, work: Path, engine: list[str]) -> None:
    _tree(work)
    content = {"output_mode": "content"}
    assert text(await call("grep", {"pattern": "hello", "glob": "*.md", **content})) == (
        "docs/guide.md:1:Say hello to the guide."
    )
    assert text(await call("grep", {"pattern": "hello", "path": "src", **content})).split("\n") == [
        "src/util.py:1:def hello():",
        "src/util.py:2:    return 'hello world'",
    ]
    assert text(await call("grep", {"pattern": "hello", "path": "src/util.py", **content})).split("\n") == [
        "src/util.py:1:def hello():",
        "src/util.py:2:    return 'hello world'",
    ]
    assert text(await call("grep", {"pattern": "^    print\\('hello", "ignore_case": True, **content})) == (
        "src/app.py:4:    print('Hello')"
    )


async def test_grep_no_match_and_bad_pattern(call: Call, work: Path, engine: list[str]) -> None:
    _tree(work)
    nothing = await call("grep", {"pattern": "absent_[0-9]+"})
    assert not nothing.is_error
    assert text(nothing) == "No matches for 'absent_[0-9]+' in the working directory."
    assert text(await call("grep", {"pattern": "absent", "path": "src"})) == "No matches for 'absent' in src."
    bad = await call("grep", {"pattern": "(unclosed"})
    assert bad.is_error
    assert bad.error is not None and bad.error["code"] == "BAD_PATTERN"
    missing = await call("grep", {"pattern": "x", "path": "nope"})
    assert missing.error is not None and missing.error["code"] == "NOT_FOUND"


async def test_grep_is_bounded_with_a_note(call: Call, work: Path, engine: list[str]) -> None:
    (work / "many.txt").write_text("match\n" * (GREP_MAX_MATCHES + 100))
    lines = text(await call("grep", {"pattern": "match", "output_mode": "content"})).split("\n")
    assert len(lines) == GREP_MAX_MATCHES + 1
    assert lines[0] == "many.txt:1:match"
    assert lines[GREP_MAX_MATCHES - 1] == f"many.txt:{GREP_MAX_MATCHES}:match"
    assert lines[-1].startswith(f"[… 100 more lines (more than {GREP_MAX_MATCHES} matches)")


async def test_grep_stops_early_on_huge_output(call: Call, work: Path, engine: list[str]) -> None:
    (work / "huge.txt").write_text(("match " + "x" * 200 + "\n") * 20_000)
    result = await call("grep", {"pattern": "^match", "output_mode": "content"})
    lines = text(result).split("\n")
    assert lines[0] == "huge.txt:1:match " + "x" * 200
    assert lines[-2] == f"huge.txt:{GREP_MAX_MATCHES}:match " + "x" * 200
    assert lines[-1].startswith("[… ") and f"(more than {GREP_MAX_MATCHES} matches)" in lines[-1]
    # Over the output budget: head and tail kept, the whole result (every line up to the note) in the spill file.
    assert result.spill is not None
    assert any(line.startswith("[… ") and result.spill in line for line in lines)
    spilled = (await anyio.Path(result.spill).read_text()).split("\n")
    assert len(spilled) == GREP_MAX_MATCHES + 1 and spilled[-1] == lines[-1]


async def test_grep_when_cancelled_returns_at_once(call: Call, work: Path, engine: list[str]) -> None:
    _tree(work)
    signal = CancelToken()
    signal.abort("cancelled")
    result = await call("grep", {"pattern": "hello"}, signal=signal)
    assert result.is_error
    assert text(result) == "[cancelled]"


async def test_grep_without_rg_on_path_falls_back_to_python(
    call: Call, work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _tree(work)
    monkeypatch.setenv("PATH", str(work / "no-binaries-here"))
    assert search.ripgrep_path() is None
    result = await call("grep", {"pattern": "hello", "glob": "**/*.py", "output_mode": "content"})
    assert text(result).split("\n") == ["src/util.py:1:def hello():", "src/util.py:2:    return 'hello world'"]


def test_the_filter_reads_the_one_glob_dialect() -> None:
    """The grep filter's patterns are the one dialect (dsh.globs; its whole table: tests/globs): the cases the old
    translator of this module asserted, read through the shared one."""
    from dsh.globs import compile_glob

    def match(pattern: str, relative: str) -> bool:
        return compile_glob(pattern).covers("/base/" + relative, "/base")

    assert match("*.py", "a.py")
    assert match("*.py", "deep/er/a.py")
    assert not match("*.py", "a.pyc")
    assert match("src/*.py", "src/a.py")
    assert not match("src/*.py", "src/x/a.py")
    assert match("src/**/*.py", "src/a.py")
    assert match("src/**/*.py", "src/x/y/a.py")
    assert match("**", "any/thing")
    assert match("file?.[ch]", "file1.c")
    assert not match("file?.[!ch]", "file1.c")
    assert match("*.{md,txt}", "notes.txt")
    assert match("./docs/*.md", "docs/a.md")


# -- discovery: modes, limits, context, filters, ignore rules, recency ---------------------------------------


def _aged(work: Path, *names: str) -> None:
    """Give *names* modification times one minute apart, the first the oldest (no two files tie)."""
    import os
    import time

    base = time.time() - 3600
    for index, name in enumerate(names):
        os.utime(work / name, (base + 60 * index, base + 60 * index))


async def test_grep_defaults_to_file_names_most_recent_first(call: Call, work: Path, engine: list[str]) -> None:
    _tree(work)
    _aged(work, "src/util.py", "src/app.py", "docs/guide.md")
    result = await call("grep", {"pattern": "hello", "case_insensitive": True})
    assert text(result).split("\n") == ["docs/guide.md", "src/app.py", "src/util.py"]
    _aged(work, "docs/guide.md", "src/app.py", "src/util.py")
    result = await call("grep", {"pattern": "hello", "case_insensitive": True})
    assert text(result).split("\n") == ["src/util.py", "src/app.py", "docs/guide.md"]


async def test_grep_count_and_head_limit(call: Call, work: Path, engine: list[str]) -> None:
    _tree(work)
    _aged(work, "src/app.py", "docs/guide.md", "src/util.py")
    counts = await call("grep", {"pattern": "hello", "output_mode": "count"})
    assert text(counts).split("\n") == ["src/util.py:2", "docs/guide.md:1"]
    first = await call("grep", {"pattern": "hello", "head_limit": 1})
    assert text(first).split("\n")[0] == "src/util.py"
    note = text(first).split("\n")[1]
    assert note.startswith("[… 1 more files (more than 1 matches); all 2 are in ")
    spilled = note.split("; all 2 are in ", 1)[1].split(": narrow", 1)[0]
    assert sorted((await anyio.Path(spilled).read_text()).split("\n")) == ["docs/guide.md", "src/util.py"]
    lines = await call("grep", {"pattern": "hello", "output_mode": "content", "head_limit": 2})
    assert text(lines).split("\n")[:2] == ["src/util.py:1:def hello():", "src/util.py:2:    return 'hello world'"]
    assert text(lines).split("\n")[2].startswith("[… 1 more lines")


async def test_grep_context_lines(call: Call, work: Path, engine: list[str]) -> None:
    (work / "c.txt").write_text("".join(f"line {i}\n" for i in range(1, 21)))
    after = await call("grep", {"pattern": "^line (5|15)$", "output_mode": "content", "-A": 1})
    assert text(after).split("\n") == ["c.txt:5:line 5", "c.txt-6-line 6", "--", "c.txt:15:line 15", "c.txt-16-line 16"]
    around = await call("grep", {"pattern": "^line 10$", "output_mode": "content", "context": 2})
    assert text(around).split("\n") == [
        "c.txt-8-line 8",
        "c.txt-9-line 9",
        "c.txt:10:line 10",
        "c.txt-11-line 11",
        "c.txt-12-line 12",
    ]
    before = await call("grep", {"pattern": "^line 2$", "output_mode": "content", "-B": 1, "-C": 0})
    assert text(before).split("\n") == ["c.txt-1-line 1", "c.txt:2:line 2"]


async def test_grep_fixed_strings_and_type(call: Call, work: Path, engine: list[str]) -> None:
    _tree(work)
    (work / "src" / "re.py").write_text("x = a.b(c)\n")
    (work / "docs" / "re.md").write_text("x = a.b(c)\n")
    literal = await call("grep", {"pattern": "a.b(c)", "fixed_strings": True, "type": "py", "output_mode": "content"})
    assert text(literal) == "src/re.py:1:x = a.b(c)"
    regex = await call("grep", {"pattern": "a.b(c)", "type": "md"})
    assert text(regex) == "No matches for 'a.b(c)' in the working directory."
    unknown = await call("grep", {"pattern": "x", "type": "cobol"})
    assert unknown.error is not None and unknown.error["code"] == "BAD_PATTERN" and "unknown type" in text(unknown)


async def test_grep_skips_what_gitignore_ignores(call: Call, work: Path, engine: list[str]) -> None:
    _tree(work)
    (work / ".gitignore").write_text("build/\n*.log\n!keep.log\n")
    for name in ("build/out.py", "debug.log", "keep.log", "src/build/gen.py", "src/kept.py"):
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text("needle\n")
    (work / "src" / ".gitignore").write_text("kept.py\n!build/\n")
    found = sorted(text(await call("grep", {"pattern": "needle"})).split("\n"))
    assert found == ["keep.log", "src/build/gen.py"]  # build/ and *.log ignored; src/kept.py by src/.gitignore
