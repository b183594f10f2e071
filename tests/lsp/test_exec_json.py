"""``dsh exec --json`` carries an edit's new diagnostics in its ``agent/tool-result`` event (issue 39), with a real
``pylsp``; the ``display`` part reaches nobody but people (it is logged), the text part is the model's."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lsp.test_diagnostics_wire import lsp_env
from tests.support.env import write_script
from tests.support.headless import exec_run

pytest.importorskip("pylsp")


def test_exec_json_carries_the_new_diagnostics(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    steps = [
        {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "bad.py", "content": "print(nope)\n"}, "id": "w1"}
            ]
        },
        {"text": "ok"},
    ]
    run = exec_run(
        tmp_path,
        "--json",
        "--allow-edits",
        "write",
        model=write_script(tmp_path / "s.json", steps),
        env=lsp_env(tmp_path),
    )
    assert run.code == 0, run.stderr
    (result,) = [e for e in run.lines if e["type"] == "agent/tool-result" and e["callId"] == "w1"]
    texts = "\n".join(block.get("text", "") for block in result["content"])
    assert "New diagnostics in bad.py (pylsp):" in texts
    assert "line 1: error: undefined name 'nope' [pyflakes]" in texts
