"""Regenerate ``src/dsh/tools/_catalogue.py`` from the built-in tools' definitions (run after changing a tool's
name, kind, description or argument model; ``tests/tools/test_catalogue.py`` fails until you do).

    .venv/bin/python scripts/gen_tool_catalogue.py && .venv/bin/ruff format src/dsh/tools/_catalogue.py
"""

from __future__ import annotations

import pprint
import re
from pathlib import Path

from dsh.tools._builtin import build_tools

TARGET = Path(__file__).resolve().parent.parent / "src" / "dsh" / "tools" / "_catalogue.py"


def main() -> None:
    source = TARGET.read_text(encoding="utf-8")
    head = source[: source.index("CATALOGUE: tuple[ToolSpec, ...] = (")]
    specs = []
    for tool in build_tools(object()):  # type: ignore[arg-type]  # build_tools only stores the workspace
        args = ", ".join(
            pprint.pformat(v, width=100, sort_dicts=False)
            for v in (tool.name, tool.meta["kind"], tool.description, tool.parameters)
        )
        specs.append(f"    ToolSpec({args}),\n")
    body = "CATALOGUE: tuple[ToolSpec, ...] = (\n" + "".join(specs) + ")\n"
    TARGET.write_text(re.sub(r"\n+$", "\n", head + body), encoding="utf-8")


if __name__ == "__main__":
    main()
