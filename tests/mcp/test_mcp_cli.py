"""``dsh mcp check``: each configured server started, its tools listed, each failure one line, status 1."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.env import sandbox_env
from tests.support.mcp_servers import stdio_server


def test_check_lists_tools_and_reports_each_failure_in_one_line(tmp_path: Path) -> None:
    served = tmp_path / "served"
    served.mkdir()
    good = stdio_server(str(served))
    config = tmp_path / "config.yaml"
    config.write_text(
        json.dumps(
            {
                "mcp_servers": {
                    "main": {
                        "command": good["command"],
                        "args": good["args"],
                        "env": {e["name"]: e["value"] for e in good["env"]},
                    },
                    "missing": {"command": str(tmp_path / "no-such-server")},
                    "nowhere": {"type": "http", "url": "http://127.0.0.1:9/mcp", "timeout": 5},
                }
            }
        ),
        encoding="utf-8",
    )
    result = subprocess.run(
        [sys.executable, "-m", "dsh", "mcp", "check", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        env=sandbox_env(tmp_path, "echo"),
        check=False,
    )
    lines = result.stdout.splitlines()
    assert result.returncode == 1, result.stderr
    assert len(lines) == 3, lines
    assert lines[0].startswith("ok    main (stdio): 8 tools: echo, add, slow")
    assert lines[1].startswith("FAIL  missing (stdio): ") and "no-such-server" in lines[1]
    assert lines[2].startswith("FAIL  nowhere (http): ")
    assert not list(served.glob("slow-*"))  # nothing was called
    assert (served / "pid-1").exists()


def test_check_without_servers_says_so(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("model: echo\n", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "dsh", "mcp", "check", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        env=sandbox_env(tmp_path, "echo"),
        check=True,
    )
    assert result.stdout.startswith("no MCP servers configured")
