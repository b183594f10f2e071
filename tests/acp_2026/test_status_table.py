"""RFC 0033's tables of where dsh stands on every ACP v1 method and session update (issue 36 item 7) cannot drift:
every stable method and update of the vendored schemas has a row, every method the front end serves is marked
served and nothing else is, and every update marked sent is built somewhere in the ACP front end's sources."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dsh.frontends.acp._frontend import AcpFrontend

ROOT = Path(__file__).resolve().parents[2]
RFC = ROOT / "rfcs" / "0033-acp-december-2026.md"
SCHEMAS = ROOT / "tests" / "acp_schema"
NEWLY_STABLE_UPDATES = {"subagent_update", "session_message", "session_message_chunk", "plan_update", "plan_removed"}


def _table(heading: str) -> list[list[str]]:
    text = RFC.read_text(encoding="utf-8")
    section = text.split(f"### {heading}\n", 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return [[cell.strip().strip("`") for cell in row.strip("|").split("|")] for row in rows]


def _schema(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
    return loaded


def _served() -> set[str]:
    """The front end's method table, read from an instance (no application: the table is built from bound methods)."""
    frontend = AcpFrontend.__new__(AcpFrontend)
    frontend._ctx = None  # type: ignore[assignment]  # _methods only binds; it calls nothing
    return set(frontend._methods())


def test_every_stable_method_has_a_row_and_served_means_served() -> None:
    rows = {row[0]: row for row in _table("Methods")}
    stable = {
        value["x-method"]
        for value in _schema("schema.json")["$defs"].values()
        if isinstance(value, dict) and "x-method" in value
    }
    assert stable <= set(rows), sorted(stable - set(rows))
    for method in stable:
        assert rows[method][2] == "stable", rows[method]
    served = _served()
    marked = {method for method, row in rows.items() if row[1] == "agent" and row[3].startswith("served")}
    assert marked == served, (sorted(marked - served), sorted(served - marked))


def test_every_stable_update_has_a_row_and_sent_means_built() -> None:
    rows = {row[0]: row for row in _table("Session updates")}
    schema = _schema("schema.json")["$defs"]["SessionUpdate"]["oneOf"]
    stable = {variant["properties"]["sessionUpdate"]["const"] for variant in schema} | NEWLY_STABLE_UPDATES
    unstable = {
        variant["properties"]["sessionUpdate"]["const"]
        for variant in _schema("schema.unstable.json")["$defs"]["SessionUpdate"]["oneOf"]
    }
    assert unstable >= NEWLY_STABLE_UPDATES  # defined where the tests validate them
    assert set(rows) == stable, (sorted(set(rows) - stable), sorted(stable - set(rows)))
    sources = "".join(path.read_text(encoding="utf-8") for path in (ROOT / "src/dsh/frontends/acp").glob("*.py"))
    sources += (ROOT / "src/dsh/context/_usage.py").read_text(encoding="utf-8")  # usage_update's builder
    for update, row in rows.items():
        assert row[2].startswith("sent"), row
        assert f'"{update}"' in sources, f"{update} is marked sent but no source of the front end names it"
