"""Import cost: ``import dsh`` and ``import dsh.kernel`` stay free of heavy third-party modules."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest

HEAVY = ("httpx", "jsonschema", "rich", "structlog", "openai", "anthropic", "pydantic")


def _run(code: str, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *flags, "-c", code],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )


def _loaded_modules(module: str) -> set[str]:
    result = _run(f"import {module}, sys; print('\\n'.join(sorted(sys.modules)))")
    return set(result.stdout.split())


def _importtime_modules(module: str) -> set[str]:
    """Module names reported by ``-X importtime`` (``import time: self | cumulative | name`` on stderr)."""
    result = _run(f"import {module}", "-X", "importtime")
    names: set[str] = set()
    for line in result.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        name = line.rsplit("|", 1)[1].strip()
        if name != "imported package":  # the header line
            names.add(name)
    return names


def _heavy_among(modules: set[str], heavy: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in heavy)


def test_helpers_see_a_heavy_import() -> None:
    """Guard against a vacuous pass: the same probes do see pydantic when it is imported."""
    assert "pydantic" in _loaded_modules("pydantic")
    assert "pydantic" in _importtime_modules("pydantic")


def test_import_dsh_loads_no_heavy_module() -> None:
    modules = _loaded_modules("dsh")
    assert "dsh" in modules
    assert _heavy_among(modules, HEAVY) == []


def test_import_dsh_importtime_lists_no_heavy_module() -> None:
    names = _importtime_modules("dsh")
    assert "dsh" in names
    assert _heavy_among(names, HEAVY) == []


@pytest.mark.parametrize("probe", [_loaded_modules, _importtime_modules])
def test_import_dsh_kernel_loads_neither_structlog_nor_rich(probe: Callable[[str], set[str]]) -> None:
    modules = probe("dsh.kernel")
    assert "dsh.kernel" in modules
    assert _heavy_among(modules, ("structlog", "rich")) == []


@pytest.mark.parametrize("probe", [_loaded_modules, _importtime_modules])
def test_the_mcp_plugin_and_the_front_end_do_not_import_the_mcp_sdk(probe: Callable[[str], set[str]]) -> None:
    """The SDK is imported when a session first has a server, never by loading the plugin or the front end."""
    modules = probe("dsh.mcp, dsh.frontends.acp._frontend, dsh.frontends.acp._daemon")
    assert "dsh.mcp" in modules and "dsh.frontends.acp._frontend" in modules
    assert _heavy_among(modules, ("mcp", "starlette", "uvicorn", "httpx", "jsonschema")) == []
