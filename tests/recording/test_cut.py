"""A recording that was cut replays what is complete and says where it stopped; the recorder says when it stops
(issue 42 item 5).

* A recording cut in the middle of a line (the daemon killed while it wrote) or at a line boundary without the
  end of input: ``dsh replay`` exits 0, every recorded frame up to the cut came as recorded, and the report names
  where the recording stops.
* A recording whose disk fills up (a real 16 KiB tmpfs, root only): the daemon keeps serving, says on stderr that
  the recording stopped, naming ENOSPC and the lines it holds, and ``dsh replay`` of that file replays up to there.
* A session fork on a full data directory answers an error that names ENOSPC (not "Internal error (OSError)").
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.recordings import record_editor_session, run_replay
from tests.support.small_disk import fill, small_disk


def cut_at(recording: Path, needle: str, *, torn: bool) -> int:
    """Cut *recording* at the first out-frame line holding *needle*: in its middle (*torn*) or before it; the
    1-based number of that line."""
    lines = recording.read_text(encoding="utf-8").splitlines(keepends=True)
    for index, line in enumerate(lines):
        if needle in line and '"dir":"out"' in line:
            kept = "".join(lines[:index]) + (line[: len(line) // 2] if torn else "")
            recording.write_text(kept, encoding="utf-8")
            return index + 1
    raise AssertionError(f"no out frame with {needle!r}")


@pytest.mark.parametrize("torn", [True, False])
async def test_a_cut_recording_replays_what_is_complete_and_says_where_it_stopped(tmp_path: Path, torn: bool) -> None:
    recording = tmp_path / "session.jsonl"
    await record_editor_session(tmp_path, recording)
    line = cut_at(recording, '"text":"word2 "', torn=torn)  # mid-reply, before the cancel
    done = run_replay(tmp_path, recording)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("ok: replayed:"), done.stdout
    where = (
        f"line {line} is torn"
        if torn
        else f"it has no end of input (the daemon was killed, or the recording stopped) after line {line - 1}"
    )
    assert "the recording stops early: " + where in done.stdout, done.stdout
    assert "Traceback" not in done.stderr


async def test_a_recording_on_a_full_disk_says_it_stopped_and_replays_up_to_there(tmp_path: Path) -> None:
    with small_disk(tmp_path / "records", "16k") as mounted:
        if not mounted:
            pytest.skip("cannot mount a tmpfs here (not root): the cut-recording test covers the replay side")
        recording = tmp_path / "records" / "session.jsonl"
        await record_editor_session(tmp_path, recording)  # the daemon serves the whole scenario regardless
        stderr = (tmp_path / "dsh.stderr.log").read_text(errors="replace")
        assert f"dsh: recording stopped: cannot write {recording} (" in stderr, stderr[-3000:]
        assert "(ENOSPC)" in stderr and "complete lines, which dsh replay replays up to there" in stderr
        done = run_replay(tmp_path, recording)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "the recording stops early" in done.stdout, done.stdout


async def test_a_fork_on_a_full_data_directory_names_enospc(tmp_path: Path) -> None:
    from acp import RequestError

    from tests.support.durable import run_daemon

    with small_disk(tmp_path / "data", "1m") as mounted:
        if not mounted:
            pytest.skip("cannot mount a tmpfs here (not root)")
        async with run_daemon(tmp_path, tmp_path / "data", allow_errors=True) as daemon:
            session = await daemon.start(tmp_path)
            assert (await daemon.prompt(session, "hello")).stop_reason == "end_turn"
            fill(tmp_path / "data")
            with pytest.raises(RequestError) as caught:
                await daemon.request("session/fork", {"sessionId": session, "cwd": str(tmp_path), "mcpServers": []})
            message = json.dumps(caught.value.to_error_obj())
            assert "ENOSPC" in message and "Internal error (OSError)" not in message, message
            (tmp_path / "data" / "filler").unlink()
