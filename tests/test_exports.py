"""A package's ``__all__`` is a promise to other packages and plugins, so it holds only names someone outside the
package uses (issue #41 item 5, RFC 0027 §5).

The rule, for every package under ``src/dsh`` but ``dsh`` itself: each name of its ``__all__`` is

* used outside the package: imported from it (``from dsh.x import name``), reached as its attribute
  (``dsh.x.name``, or ``x.name`` where ``x`` was imported as the package), or named in a ``module:attribute``
  string (``DSH_PLUGINS`` entries), by a module outside the package's directory in ``src/dsh``, ``tests/support``
  or ``scripts`` (a test of the package itself imports its private modules: it is not a user); or
* listed in the package README's ``Plugin-facing names:`` line: what a plugin outside dsh programs against although
  nothing inside dsh uses it (a seam's types, the defaults a listener falls through to).

And every name of a ``Plugin-facing names:`` line is exported (the README does not promise what is not there), and
the README's ``Public names`` line lists the rest of ``__all__``, exactly (``tests/test_agents_md.py`` checks that
every package has a README).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PLUGIN_FACING = re.compile(r"^Plugin-facing names: (.*)$", re.MULTILINE)
PUBLIC = re.compile(r"^Public names[^:]*: (.*)$", re.MULTILINE)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _exports() -> dict[str, tuple[Path, list[str]]]:
    """package → (its directory, its ``__all__``)."""
    found: dict[str, tuple[Path, list[str]]] = {}
    for init in sorted(SRC.rglob("__init__.py")):
        package = _module_name(init)
        if package == "dsh":
            continue
        for node in ast.parse(init.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                found[package] = (init.parent, list(ast.literal_eval(node.value)))
    return found


def _users() -> dict[tuple[str, str], set[Path]]:
    """(package or module, name) → the files that use that name of it."""
    files = [*SRC.rglob("*.py"), *(ROOT / "tests" / "support").rglob("*.py"), *(ROOT / "scripts").rglob("*.py")]
    users: dict[tuple[str, str], set[Path]] = {}
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        bound: dict[str, str] = {}  # a local name → the dsh module it is
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("dsh."):
                        bound[alias.asname or alias.name] = alias.name
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    users.setdefault((node.module, alias.name), set()).add(path)
                    if node.module == "dsh" or node.module.startswith("dsh."):
                        bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                base = ast.unparse(node.value)
                users.setdefault((bound.get(base, base), node.attr), set()).add(path)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                match = re.fullmatch(r"(dsh[\w.]*):(\w+)", node.value)
                if match:
                    users.setdefault((match.group(1), match.group(2)), set()).add(path)
    return users


def _plugin_facing(directory: Path) -> list[str]:
    readme = directory / "README.md"
    if not readme.exists():
        return []
    names: list[str] = []
    for line in PLUGIN_FACING.findall(readme.read_text(encoding="utf-8")):
        names += re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", line)
    return names


PENDING: dict[str, list[str]] = {}
"""Exported names used by no other package that are still to be trimmed (none: the list only shrinks)."""

EXPORTS = _exports()
USERS = _users()


def test_the_walk_sees_the_uses_it_must() -> None:
    assert "dsh.app" in {package for package, _name in USERS}
    assert any(path.name == "app.py" for path in USERS[("dsh.loop", "agent_loop_plugin")])
    assert len(EXPORTS) > 30


def test_every_exported_name_is_used_outside_its_package_or_plugin_facing() -> None:
    unused: dict[str, list[str]] = {}
    for package, (directory, names) in EXPORTS.items():
        facing = set(_plugin_facing(directory))
        for name in names:
            outside = [path for path in USERS.get((package, name), ()) if directory not in path.parents]
            if not outside and name not in facing:
                unused.setdefault(package, []).append(name)
    assert {package: sorted(names) for package, names in unused.items()} == PENDING, (
        "exported but used by no other package (trim __all__, or list it as plugin-facing)"
    )


def test_plugin_facing_names_are_exported() -> None:
    missing = {
        package: sorted(set(_plugin_facing(directory)) - set(names))
        for package, (directory, names) in EXPORTS.items()
        if set(_plugin_facing(directory)) - set(names)
    }
    assert missing == {}


def test_each_readme_lists_its_public_names() -> None:
    wrong: dict[str, tuple[list[str], list[str]]] = {}
    for package, (directory, names) in EXPORTS.items():
        readme = directory / "README.md"
        if not readme.exists():
            continue
        lines = PUBLIC.findall(readme.read_text(encoding="utf-8"))
        listed = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", lines[0])) if lines else set()
        expected = set(names) - set(_plugin_facing(directory))
        if listed != expected:
            wrong[package] = (sorted(listed - expected), sorted(expected - listed))
    assert wrong == {}, "package → (listed but not exported, exported but not listed)"
