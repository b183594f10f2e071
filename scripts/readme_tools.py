"""The README's list of the tools the model gets, generated from the code (issue #29: no count in prose).

``python scripts/readme_tools.py`` prints the list; ``--write`` replaces the block between the README's
``<!-- tools -->`` and ``<!-- /tools -->`` markers with it. ``tests/newcomer/test_readme.py`` fails when the
README's names differ from the code's, so a tool added or renamed comes with this one command.

The tools are the ones the ACP daemon registers at start-up (the core plugins and the ACP front end's own, before
any MCP server or ``DSH_PLUGINS`` entry), each with the first sentence of its description: what the model is told.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BEGIN = "<!-- tools -->"
END = "<!-- /tools -->"


async def _registered() -> list[tuple[str, str]]:
    from dsh.app import load_core
    from dsh.frontends.acp._frontend import AcpOptions, acp_plugin
    from dsh.kernel import App
    from dsh.lsp import LspConfig

    async with App() as app:
        load_core(app.ctx, lsp=LspConfig())  # the product's default lsp section (auto): the diagnostics tool
        app.ctx.plugin(acp_plugin, AcpOptions(lambda frame: None))
        return [(schema["name"], schema.get("description") or "") for schema in app.ctx.tools.schemas()]


def model_tools() -> list[tuple[str, str]]:
    """(name, first sentence of the description) of every tool the model gets at start-up, in registration order."""
    return [(name, first_sentence(description)) for name, description in anyio.run(_registered)]


def first_sentence(text: str) -> str:
    match = re.match(r"(.+?[.!?])(\s|$)", " ".join(text.split()))
    return match.group(1) if match else " ".join(text.split())


def render(tools: list[tuple[str, str]]) -> str:
    return "\n".join(f"- `{name}`: {sentence}" for name, sentence in tools)


def readme_names(text: str) -> list[str]:
    """The tool names listed between the markers of README text (in order)."""
    block = text.split(BEGIN, 1)[1].split(END, 1)[0]
    return re.findall(r"^- `([^`]+)`", block, re.M)


def write(text: str, tools: list[tuple[str, str]]) -> str:
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{render(tools)}\n{END}{tail}"


def main() -> int:
    tools = model_tools()
    if "--write" in sys.argv[1:]:
        README.write_text(write(README.read_text(encoding="utf-8"), tools), encoding="utf-8")
        print(f"README.md: {len(tools)} tools")
        return 0
    print(render(tools))
    return 0


if __name__ == "__main__":
    sys.exit(main())
