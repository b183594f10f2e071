"""Plans over ACP: the ``update_plan`` tool, its ``plan`` updates, their replay and ``/status``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from acp.schema import AgentPlanUpdate

from dsh.errors import ToolArgsError
from dsh.plans._plugin import validate_entries
from tests.support.sdk import run_dsh, write_script

WAIT = 15.0
FIRST = [
    {"content": "Read the code", "status": "in_progress", "priority": "high"},
    {"content": "Fix the bug", "status": "pending"},
]
SECOND = [
    {"content": "Read the code", "status": "completed", "priority": "high"},
    {"content": "Fix the bug", "status": "in_progress"},
    {"content": "Run the tests", "status": "pending", "priority": "low"},
]


def plans(updates: list[Any]) -> list[list[tuple[str, str, str]]]:
    return [[(e.content, e.status, e.priority) for e in u.entries] for u in updates if isinstance(u, AgentPlanUpdate)]


def script(tmp_path: Path) -> str:
    return write_script(
        tmp_path / "plan.json",
        [
            {"tool_calls": [{"name": "update_plan", "arguments": {"entries": FIRST}, "id": "p1"}]},
            {"tool_calls": [{"name": "update_plan", "arguments": {"entries": SECOND}, "id": "p2"}]},
            {"text": "Done planning."},
        ],
    )


EXPECTED = [
    [("Read the code", "in_progress", "high"), ("Fix the bug", "pending", "medium")],
    [
        ("Read the code", "completed", "high"),
        ("Fix the bug", "in_progress", "medium"),
        ("Run the tests", "pending", "low"),
    ],
]


@pytest.mark.parametrize("mode", ["default", "plan"])
async def test_each_update_plan_call_sends_the_full_list_and_load_replays_them(tmp_path: Path, mode: str) -> None:
    async with run_dsh(tmp_path, script(tmp_path), name="first") as daemon:
        with anyio.fail_after(WAIT):
            session_id = await daemon.start()
            if mode != "default":
                await daemon.conn.set_session_mode(mode_id=mode, session_id=session_id)
            response = await daemon.prompt(session_id, "fix the bug")
        assert response.stop_reason == "end_turn"
        assert plans(daemon.client.of(session_id)) == EXPECTED
        assert daemon.client.text(session_id) == "Done planning."
        with anyio.fail_after(WAIT):
            status = (await daemon.prompt(session_id, "/status")).stop_reason
        assert status == "end_turn"
        shown = daemon.client.chunk_texts(session_id)[-1]
        assert shown.splitlines()[-4:] == ["Plan:", "  [x] Read the code", "  [~] Fix the bug", "  [ ] Run the tests"]
    async with run_dsh(tmp_path, name="loader") as daemon:
        with anyio.fail_after(WAIT):
            await daemon.initialize()
            await daemon.conn.load_session(cwd=str(tmp_path), session_id=session_id, mcp_servers=[])
        assert plans(daemon.client.of(session_id)) == EXPECTED


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ("{}", "not a JSON object"),
        ({}, "'entries' must be a list"),
        ({"entries": [{"content": "", "status": "pending"}]}, "entries.0.content must be a non-empty string"),
        ({"entries": [{"content": "x", "status": "done"}]}, "entries.0.status must be one of"),
        ({"entries": [{"content": "x", "status": "pending", "priority": "urgent"}]}, "entries.0.priority must be"),
        ({"entries": ["x"]}, "entries.0 must be an object"),
    ],
)
def test_a_bad_plan_is_an_error_that_says_what_is_wrong(arguments: Any, problem: str) -> None:
    with pytest.raises(ToolArgsError, match=problem):
        validate_entries(arguments)
