"""``dsh sessions fork ID [--at N]`` (issue 25 item 4): the fork's next request to the model holds the history up
to the fork point, its header names the source, and the source is unchanged (real daemon, loopback provider,
the real CLI)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.checkpoints.test_rewind_acp import env_of, text, user_texts
from tests.checkpoints.test_storage import sessions_cli
from tests.support.editor import EditorClient, run_editor
from tests.support.provider_server import FakeProvider

MODEL = "openai:test-model"


async def test_fork_at_a_turn_and_whole_give_sessions_of_their_own(server: FakeProvider, tmp_path: Path) -> None:
    server.script(text("one"), text("two"), text("three"))
    async with run_editor(tmp_path, MODEL, EditorClient(), env=env_of(server)) as editor:
        source = (await editor.new_session()).session_id
        for words in ("turn one", "turn two", "turn three"):
            assert (await editor.prompt(source, words)).stop_reason == "end_turn"
    data = tmp_path / "dsh-data"
    before = (data / f"{source}.jsonl").read_bytes()

    at_two = await sessions_cli(tmp_path, "fork", source, "--at", "2")
    assert at_two.returncode == 0, at_two.stderr.decode()
    fork = at_two.stdout.decode().strip()
    whole = (await sessions_cli(tmp_path, "fork", source)).stdout.decode().strip()
    assert len({fork, whole, source}) == 3
    header = json.loads((data / f"{fork}.jsonl").read_bytes().split(b"\n", 1)[0])
    assert header["parent_session"] == source and header["id"] == fork
    shown = await sessions_cli(tmp_path, "show", fork)
    assert f"  forked from: {source}\n" in shown.stdout.decode()

    bad = await sessions_cli(tmp_path, "fork", source, "--at", "4")
    assert bad.returncode == 2 and "no turn 4 (its turns: 1 to 3)" in bad.stderr.decode()

    server.script(text("fork reply"), text("whole reply"), text("source reply"))
    async with run_editor(tmp_path, MODEL, EditorClient(), env=env_of(server), name="second") as editor:
        asked = []
        for session in (fork, whole, source):
            await editor.load_session(session)
            assert (await editor.prompt(session, "turn next")).stop_reason == "end_turn"
            asked.append(user_texts(server.requests[-1].body))
    assert asked[0] == ["turn one", "turn two", "turn next"]
    assert asked[1] == ["turn one", "turn two", "turn three", "turn next"]
    assert asked[2] == ["turn one", "turn two", "turn three", "turn next"]
    assert (data / f"{source}.jsonl").read_bytes().startswith(before)  # the source only grew by its own turn
