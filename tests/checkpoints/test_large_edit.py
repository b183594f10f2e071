"""Large edits stored small (issue 42 item 4): editing one line of a 10 MiB file puts the changed region (with a
few lines of context) in the session log and in the editor's frames, never the whole file; the rewind restores
the whole file exactly, and a ``session/load`` replays the excerpt.
"""

from __future__ import annotations

import json
from pathlib import Path

from dsh.checkpoints._excerpt import CONTEXT, excerpt, shrink_diff
from tests.support.durable import Daemon, run_daemon, session_path
from tests.support.editor import call
from tests.support.env import write_script

LIMIT = 100_000
"""No log line and no frame may come near the file's size (10 MiB)."""


def big_file() -> str:
    return "".join(f"line {i:07d} of a big generated file\n" for i in range(300_000))  # ~10.5 MB


def diffs_of(messages: list[dict]) -> list[dict]:
    found: list[dict] = []
    for message in messages:
        update = message.get("params", {}).get("update", {}) if isinstance(message.get("params"), dict) else {}
        found.extend(c for c in update.get("content") or () if isinstance(c, dict) and c.get("type") == "diff")
    return found


def incoming(daemon: Daemon, since: int = 0) -> list[dict]:
    return [m for d, m in daemon.client.wire[since:] if d == "in"]


async def test_a_one_line_edit_of_a_10_mib_file_is_stored_and_shown_as_its_region(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    text = big_file()
    (project / "big.txt").write_text(text)
    model = write_script(
        tmp_path / "script.json",
        [
            call("read_file", "r1", path="big.txt", offset=150_000, limit=3),
            call("edit_file", "e1", path="big.txt", old_string="line 0150001 of", new_string="LINE 150001 OF"),
            {"text": "edited"},
        ],
    )
    data = tmp_path / "data"
    async with run_daemon(tmp_path, data, model=model) as daemon:
        session = await daemon.start(project)
        await daemon.conn.set_session_mode(session_id=session, mode_id="bypass")
        assert (await daemon.prompt(session, "edit the big file")).stop_reason == "end_turn"
        edited = (project / "big.txt").read_text()
        assert edited == text.replace("line 0150001 of", "LINE 150001 OF")
        frames = incoming(daemon)
        assert max(len(json.dumps(m)) for m in frames) < LIMIT
        diff = diffs_of(frames)[-1]  # the completed call's
        assert "line 0150001 of" in diff["oldText"] and "LINE 150001 OF" in diff["newText"]
        assert diff["oldText"].count("\n") == 2 * CONTEXT + 1
        lines = session_path(data, session).read_bytes().split(b"\n")
        assert max(len(line) for line in lines) < LIMIT
        (result,) = [json.loads(line) for line in lines if b'"tool/result"' in line and b'"e1"' in line]
        assert result["data"]["display"]["diff"]["excerpt"] == {
            "line": 150_002 - CONTEXT,
            "old_chars": len(text),
            "new_chars": len(edited),
        }

        mark = daemon.mark()
        reply = await daemon.prompt(session, "/rewind 1")
        assert reply.stop_reason == "end_turn"
        assert (project / "big.txt").read_text() == text  # the whole file, from the checkpoint store
    async with run_daemon(tmp_path, data, model=model) as daemon:
        await daemon.initialize()
        mark = daemon.mark()
        await daemon.load(session, project)
        replayed = incoming(daemon, mark)
        assert max(len(json.dumps(m)) for m in replayed) < LIMIT


def test_the_excerpt_puts_back_exactly_and_small_diffs_are_untouched() -> None:
    old = "".join(f"{i}\n" for i in range(50_000))
    new = old.replace("\n25000\n", "\n25000 changed\n").replace("\n40000\n", "\n")
    old_part, new_part, line = excerpt(old, new)
    offset = sum(len(f"{i}\n") for i in range(line - 1))
    assert old[:offset] + old_part + old[offset + len(old_part) :] == old
    assert new[:offset] + new_part + new[offset + len(new_part) :] == new
    assert old_part.startswith("24997\n") and old_part.endswith("40003\n")
    small = {"diff": {"path": "/p", "old_text": "a\n", "new_text": "b\n"}}
    assert shrink_diff(small) is small
    created = shrink_diff({"diff": {"path": "/p", "old_text": None, "new_text": "x\n" * 40_000}})
    assert created["diff"]["old_text"] is None and created["diff"]["excerpt"]["line"] == 1
