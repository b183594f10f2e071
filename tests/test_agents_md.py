"""``AGENTS.md`` stays true (issue #41 item 5): every path its layout and its feature index name exists, every
package under ``src/dsh`` is in the layout, and every package has a README (what is here, what is not, the
public names)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "dsh"
TEXT = (ROOT / "AGENTS.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    start = TEXT.index(f"## {title}\n")
    end = TEXT.find("\n## ", start + 1)
    return TEXT[start : end if end != -1 else len(TEXT)]


def _paths(text: str) -> set[str]:
    return {p for p in re.findall(r"`((?:src|tests|scripts|packaging|rfcs)/[^`*]*?)`", text) if "<" not in p}


def test_every_path_of_the_layout_exists() -> None:
    paths = _paths(_section("Layout"))
    assert len(paths) > 20
    assert sorted(p for p in paths if not (ROOT / p).exists()) == []


def test_every_package_is_in_the_layout() -> None:
    layout = _section("Layout")
    packages = sorted(
        p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists() and not p.name.startswith("_")
    )
    assert sorted(name for name in packages if f"src/dsh/{name}/" not in layout) == []


def test_every_row_of_the_feature_index_names_existing_places() -> None:
    index = _section("Feature index")
    rows = [line for line in index.splitlines() if line.startswith("|") and not line.startswith("|---")][1:]
    assert len(rows) > 15
    missing = []
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        package, tests = cells[1], cells[-1]
        missing += [
            name
            for name in re.findall(r"`([^`]+)`", package)
            if not (SRC / name.split(" ")[0]).exists() and not (ROOT / name).exists()
        ]
        missing += [
            name for name in re.findall(r"`([^`*]+)`", tests) if not (ROOT / name.split("::")[0].split(" ")[0]).exists()
        ]
    assert missing == []


def test_every_package_has_a_readme() -> None:
    lacking = sorted(
        str(p.relative_to(SRC.parent))
        for p in SRC.rglob("__init__.py")
        if p.parent != SRC and "__pycache__" not in p.parts and not (p.parent / "README.md").exists()
    )
    assert lacking == []
