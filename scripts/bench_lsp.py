"""Diagnostics after an edit (RFC 0037): what a real ``pylsp`` (pyflakes) adds to one edit.

Prints the cold edit (server start-up, ``initialize``, the file opened at its old text, then changed) and the
median and worst of warm edits (the server running, the file open: one ``didChange`` and its diagnostics), for a
small and a 2,000-line file. Run: ``.venv/bin/python scripts/bench_lsp.py``.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from dsh.lsp import LspConfig
from dsh.lsp._manager import LspManager

WARM = 30


async def run(lines: int) -> None:
    config = LspConfig.model_validate(
        {
            "enabled": True,
            "timeout": 60,
            "servers": {"pylsp": {"command": [sys.executable, "-m", "pylsp"], "languages": ["python"]}},
        }
    )
    lsp = LspManager(config)
    with tempfile.TemporaryDirectory() as root:
        path = str(Path(root) / "mod.py")
        body = "".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(lines // 2))
        started = time.perf_counter()
        report = await lsp.after_edit([(path, body, body + "y = 1\n")], root, "bench")
        cold = time.perf_counter() - started
        assert report.checked, report.notes
        warm = []
        for n in range(WARM):
            text = body + ("print(missing)\n" if n % 2 else "y = 2\n")
            started = time.perf_counter()
            report = await lsp.after_edit([(path, None, text)], root, "bench")
            warm.append(time.perf_counter() - started)
            assert report.checked, report.notes
        await lsp.aclose()
    print(
        f"{lines:>5} lines: cold edit {cold * 1000:7.0f} ms; warm edit median {statistics.median(warm) * 1000:6.1f} ms,"
        f" worst {max(warm) * 1000:6.1f} ms ({WARM} edits)"
    )


async def main() -> None:
    for lines in (20, 2000):
        await run(lines)


if __name__ == "__main__":
    asyncio.run(main())
