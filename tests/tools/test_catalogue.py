"""The start-up catalogue of the built-in tools is exactly what the tool bodies define (a drift guard), and the
bodies are not loaded before a tool is used."""

from __future__ import annotations

import subprocess
import sys

from dsh.tools._builtin import build_tools
from dsh.tools._catalogue import CATALOGUE


class _NoWorkspace:
    """build_tools only stores the workspace; nothing here runs a tool."""


def test_the_catalogue_matches_the_tool_definitions() -> None:
    real = build_tools(_NoWorkspace())  # type: ignore[arg-type]
    assert [(s.name, s.kind, s.description, s.parameters) for s in CATALOGUE] == [
        (t.name, t.meta["kind"], t.description, t.parameters) for t in real
    ]


def test_registering_the_tools_does_not_load_their_bodies() -> None:
    code = (
        "import anyio, sys\n"
        "from dsh.kernel import App\n"
        "from dsh.app import load_core\n"
        "async def main():\n"
        "    async with App() as app:\n"
        "        load_core(app.ctx)\n"
        "        assert app.ctx.tools.get('read_file') is not None\n"
        "        print('dsh.tools._builtin' in sys.modules)\n"
        "anyio.run(main)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_the_prepared_tools_are_the_ones_the_plugin_registers_lazily() -> None:
    from dsh.tools._plugin import PREPARED

    real = build_tools(_NoWorkspace())  # type: ignore[arg-type]
    assert {t.name for t in real if t.prepare is not None} == PREPARED
