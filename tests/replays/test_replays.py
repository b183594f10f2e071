"""Every recording in ``tests/replays/`` replays exactly with ``dsh replay`` (RFC 0020).

A failure here means the daemon now sends something else than it did when the recording was made: read the
report (it names the first frame that differs and shows the diff); if the change is meant, make the recordings
again (``python -m tests.replays.record``) or update one (``dsh replay FILE --cwd DIR --update``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.recordings import run_replay

HERE = Path(__file__).resolve().parent
RECORDINGS = sorted(HERE.glob("*.jsonl"))


def test_there_are_recordings() -> None:
    assert len(RECORDINGS) >= 3, RECORDINGS


@pytest.mark.parametrize("recording", RECORDINGS, ids=[path.stem for path in RECORDINGS])
def test_recording_replays(recording: Path, tmp_path: Path) -> None:
    first = next(json.loads(line) for line in recording.read_text(encoding="utf-8").splitlines())
    assert first["kind"] == "header"
    project = tmp_path / "project"
    project.mkdir()
    result = run_replay(tmp_path, recording, "--cwd", str(project))
    assert result.returncode == 0, (
        result.stdout
        + result.stderr
        + "\nIf this change of what the daemon sends is meant, make the recordings again: "
        + ".venv/bin/python -m tests.replays.record (and commit them)."
    )
    assert result.stdout.startswith("ok: replayed: "), result.stdout
