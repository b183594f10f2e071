"""The glob tool: paths by pattern, most recently modified first, .gitignore and hidden directories honoured,
about 100 at most with a note saying how many more there are."""

from __future__ import annotations

import os
import time
from pathlib import Path

from dsh.tools._builtin import GLOB_MAX_FILES
from tests.tools.conftest import Call, text


def _files(work: Path, *names: str) -> None:
    """Create *names*, the first the oldest (modification times one minute apart: no two tie)."""
    base = time.time() - 3600
    for index, name in enumerate(names):
        path = work / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x\n")
        os.utime(path, (base + 60 * index, base + 60 * index))


async def test_glob_returns_the_most_recently_modified_first(call: Call, work: Path) -> None:
    _files(work, "src/a.py", "src/deep/b.py", "tests/test_c.py", "README.md", "src/d.py")
    result = await call("glob", {"pattern": "**/*.py"})
    assert not result.is_error
    assert text(result).split("\n") == ["src/d.py", "tests/test_c.py", "src/deep/b.py", "src/a.py"]
    assert text(await call("glob", {"pattern": "src/*.py"})).split("\n") == ["src/d.py", "src/a.py"]
    assert text(await call("glob", {"pattern": "*.py", "path": "src/deep"})) == "src/deep/b.py"
    assert text(await call("glob", {"pattern": "*.rs"})) == "[no files match '*.rs' in .]"


async def test_glob_skips_ignored_and_hidden_unless_named(call: Call, work: Path) -> None:
    _files(
        work,
        ".gitignore",
        "build/gen.py",
        "node_modules/x/index.js",
        ".github/workflows/ci.yml",
        ".venv/lib/site.py",
        "app.py",
        "dist/bundle.js",
    )
    (work / ".gitignore").write_text("build/\ndist/\n")
    assert text(await call("glob", {"pattern": "**/*.py"})) == "app.py"
    assert text(await call("glob", {"pattern": "**/*.js"})) == "[no files match '**/*.js' in .]"
    assert text(await call("glob", {"pattern": "**/*.yml"})) == "[no files match '**/*.yml' in .]"
    assert text(await call("glob", {"pattern": ".github/**/*.yml"})) == ".github/workflows/ci.yml"


async def test_glob_stops_at_its_cap_with_a_note(call: Call, work: Path) -> None:
    names = [f"many/f{index:04}.txt" for index in range(GLOB_MAX_FILES + 7)]
    _files(work, *names)
    lines = text(await call("glob", {"pattern": "many/*.txt"})).split("\n")
    assert len(lines) == GLOB_MAX_FILES + 1
    assert lines[0] == names[-1]  # the newest
    assert lines[-1] == (
        f"[… 7 more files match (showing the {GLOB_MAX_FILES} most recently modified): narrow the pattern or the path]"
    )


async def test_glob_errors(call: Call, work: Path) -> None:
    missing = await call("glob", {"pattern": "*", "path": "nope"})
    assert missing.error is not None and missing.error["code"] == "NOT_FOUND"
    outside = await call("glob", {"pattern": "*", "path": ".."})
    assert outside.error is not None and outside.error["code"] == "OUTSIDE_ROOTS"
