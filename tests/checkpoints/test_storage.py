"""Storage bounds (issue 25 item 5): checkpoint bytes are shared by content between sessions, deleting a session
deletes only the bytes no other session holds, and ``dsh sessions prune`` removes old and never-prompted sessions
(real daemon over the SDK client, loopback provider, then the real CLI in a subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import anyio

from tests.checkpoints.test_rewind_acp import env_of, text, tool
from tests.support.editor import EditorClient, run_editor
from tests.support.provider_server import FakeProvider

MODEL = "openai:test-model"


def objects(data: Path) -> list[str]:
    root = data / "blobs" / "objects"
    return sorted(p.name for p in root.rglob("*") if p.is_file()) if root.exists() else []


def owners(data: Path) -> list[str]:
    root = data / "blobs" / "owners"
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


async def sessions_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("DSH_")}
    env["DSH_DATA_DIR"] = str(tmp_path / "dsh-data")
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    with anyio.fail_after(30):
        return await anyio.run_process([sys.executable, "-m", "dsh", "sessions", *args], env=env, check=False)


async def test_blobs_are_shared_deleted_with_the_last_session_and_prune_removes_old_and_empty_sessions(
    server: FakeProvider, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    original = "a = 'v0'\n"
    (project / "a.py").write_text(original)
    server.script(
        tool("r1", "read_file", path="a.py"),
        tool("e1", "edit_file", path="a.py", old_string="v0", new_string="v1"),
        text("one"),
        tool("r2", "read_file", path="a.py"),
        tool("e2", "edit_file", path="a.py", old_string="v0", new_string="v2"),
        text("two"),
        text("just talk"),
    )
    async with run_editor(tmp_path, MODEL, EditorClient(["allow_once"] * 2), env=env_of(server)) as editor:
        first = (await editor.new_session()).session_id
        assert (await editor.prompt(first, "edit a")).stop_reason == "end_turn"
        (project / "a.py").write_text(original)  # the same bytes again: the second checkpoint shares them
        second = (await editor.new_session()).session_id
        assert (await editor.prompt(second, "edit a again")).stop_reason == "end_turn"
        empty = (await editor.new_session()).session_id
        recent = (await editor.new_session()).session_id
        assert (await editor.prompt(recent, "hello")).stop_reason == "end_turn"
    data = tmp_path / "dsh-data"
    assert (project / "a.py").read_text() == "a = 'v2'\n"
    assert len(objects(data)) == 1  # the two checkpoints of the same bytes: one object
    assert owners(data) == sorted([f"{first}.checkpoints", f"{second}.checkpoints"])

    removed = await sessions_cli(tmp_path, "rm", first)
    assert removed.returncode == 0, removed.stderr.decode()
    assert owners(data) == [f"{second}.checkpoints"]
    assert len(objects(data)) == 1  # the second session still holds the bytes

    forty_days_ago = time.time() - 40 * 86400
    os.utime(data / f"{second}.jsonl", (forty_days_ago, forty_days_ago))
    pruned = await sessions_cli(tmp_path, "prune", "--older-than", "30d")
    assert pruned.returncode == 0, pruned.stderr.decode()
    assert "Removed 1 session(s) older than 30d and 1 never prompted" in pruned.stdout.decode()
    assert not (data / f"{second}.jsonl").exists() and not (data / f"{empty}.jsonl").exists()
    assert (data / f"{recent}.jsonl").exists()  # recent and prompted: kept
    assert objects(data) == [] and owners(data) == []

    bad = await sessions_cli(tmp_path, "prune", "--older-than", "a month")
    assert bad.returncode == 2 and "30d, 12h" in bad.stderr.decode()
    assert (data / f"{recent}.jsonl").exists()
