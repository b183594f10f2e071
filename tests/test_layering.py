"""The layering of ``src/dsh`` (issue #21 item 5), by an AST walk of every module: every import counts, at module
level, inside functions and under ``TYPE_CHECKING``.

* Nothing under ``src/dsh`` imports ``dsh.app`` except the CLI and the front ends (``dsh.cli``,
  ``dsh.frontends.*``): the core does not depend on how the application is assembled.
* The ACP front end's package has no import circle: its desks reach the front end through ``_ports`` and
  ``_session``, never through ``_frontend``.
* No package imports another package's private (``_``) modules: each re-exports what others use.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
APP_USERS = ("dsh.cli", "dsh.__main__", "dsh._entry")


def _name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_name(path): path for path in SRC.rglob("*.py")}


def _imports(module: str, path: Path, *, runtime: bool = False) -> Iterator[str]:
    """The imports of *module*, module level and inside functions. *runtime*: only those that can run, so not
    those under ``if TYPE_CHECKING:`` (they never execute; the typed context declares the interface services'
    types through them by design, RFC 0027)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only: set[int] = set()
    for node in ast.walk(tree) if runtime else ():
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else None
            if name == "TYPE_CHECKING":
                typing_only.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            yield target
            for alias in node.names:  # ``from dsh.x import _y`` imports the module dsh.x._y
                if f"{target}.{alias.name}" in MODULES:
                    yield f"{target}.{alias.name}"


GRAPH = {
    module: {target for target in _imports(module, path) if target == "dsh" or target.startswith("dsh.")}
    for module, path in MODULES.items()
}


def test_the_walk_sees_the_imports_it_must() -> None:
    assert "dsh.app" in GRAPH["dsh.cli"]  # function-level
    assert "dsh.frontends.acp._ports" in GRAPH["dsh.frontends.acp._gate"]  # TYPE_CHECKING
    assert "dsh.kernel" in GRAPH["dsh.events"]  # module level
    assert len(MODULES) > 100


def test_only_the_cli_and_the_front_ends_import_the_application() -> None:
    users = {module for module, targets in GRAPH.items() if "dsh.app" in targets}
    assert users, "the walk found no importer of dsh.app at all"
    assert sorted(m for m in users if m not in APP_USERS and not m.startswith("dsh.frontends.")) == []


def _cycles(prefix: str) -> list[list[str]]:
    """Strongly connected components of more than one module among the modules under *prefix* (Tarjan)."""
    nodes = {
        m: {t for t in GRAPH[m] if t.startswith(prefix) and t in MODULES and t != m}
        for m in GRAPH
        if m.startswith(prefix)
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in nodes[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in nodes:
        if node not in index:
            visit(node)
    return found


def test_the_acp_front_end_has_no_import_circle() -> None:
    assert len([m for m in GRAPH if m.startswith("dsh.frontends.acp.")]) > 10
    assert _cycles("dsh.frontends.acp") == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    GRAPH["dsh.frontends.acp._pickers"].add("dsh.frontends.acp._frontend")
    try:
        assert _cycles("dsh.frontends.acp") != []
    finally:
        GRAPH["dsh.frontends.acp._pickers"].discard("dsh.frontends.acp._frontend")


def test_no_package_imports_another_packages_private_modules() -> None:
    crossing = set()
    for module, targets in GRAPH.items():
        for target in targets:
            parts = target.split(".")
            for depth, part in enumerate(parts):
                if part.startswith("_") and not part.startswith("__"):
                    owner = ".".join(parts[:depth])
                    if module != owner and not module.startswith(owner + "."):
                        crossing.add((module, target))
                    break
    assert sorted(crossing) == []


# -- no import circle through the leaves (issue #41 item 2, RFC 0027) -------------------------------------------


RUNTIME = {
    module: {target for target in _imports(module, path, runtime=True) if target == "dsh" or target.startswith("dsh.")}
    for module, path in MODULES.items()
}


def _runtime_circles() -> list[list[str]]:
    """Circles among the runtime imports longer than a pair of modules of one package (such a pair is one room
    split in two files, e.g. the loop's agent and driver)."""
    saved = {module: set(targets) for module, targets in GRAPH.items()}
    GRAPH.clear()
    GRAPH.update(RUNTIME)
    try:
        found = _cycles("dsh")
    finally:
        GRAPH.clear()
        GRAPH.update(saved)

    def same_package_pair(circle: list[str]) -> bool:
        return len(circle) == 2 and circle[0].rsplit(".", 1)[0] == circle[1].rsplit(".", 1)[0]

    return [circle for circle in found if not same_package_pair(circle)]


def test_the_walk_sees_lazy_imports_and_leaves_typing_imports_out() -> None:
    assert "dsh.app" in RUNTIME["dsh.cli"]  # function-level
    assert "dsh.frontends.acp._ports" not in RUNTIME["dsh.frontends.acp._gate"]  # TYPE_CHECKING only
    assert "dsh.frontends.acp._ports" in GRAPH["dsh.frontends.acp._gate"]


def test_no_import_circle_longer_than_a_same_package_pair() -> None:
    """The leaves (``_log``, ``errors``, ``settings``), the features and the entry layer form no circle: the
    46-module circle ``_log → settings → config → every feature``, the 56-module one through ``config``,
    ``commands``, ``context`` and ``services.llm``, and the entry layer's (``_entry``, ``cli``, ``chat``) are gone."""
    assert len(RUNTIME) > 100
    assert _runtime_circles() == []


def test_the_circle_finder_sees_a_circle_through_a_lazy_import() -> None:
    RUNTIME["dsh.errors"].add("dsh.settings")  # settings imports errors: a lazy import back closes a circle
    try:
        assert any("dsh.errors" in circle for circle in _runtime_circles())
    finally:
        RUNTIME["dsh.errors"].discard("dsh.settings")
