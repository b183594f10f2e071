"""Make the recordings of ``tests/replays/`` again: ``python -m tests.replays.record`` (from the repository root).

Each is a real run of ``dsh acp --record`` driven by the official ACP SDK client on an offline model
(:mod:`tests.support.recordings`); ``test_replays.py`` replays every ``*.jsonl`` here with ``dsh replay``. Run
this after a deliberate change of what the daemon sends (or ``dsh replay FILE --cwd DIR --update`` one file).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import anyio

from tests.support.recordings import record_editor_session
from tests.support.sdk import run_dsh

HERE = Path(__file__).resolve().parent


async def _echo_with_agent_events(tmp_path: Path, recording: Path) -> None:
    async with run_dsh(tmp_path, "echo", env={"DSH_RECORD": str(recording)}, agent_events=True) as dsh:
        await dsh.initialize()
        session = await dsh.new_session()
        assert (await dsh.prompt(session, "hello there, echo")).stop_reason == "end_turn"
        assert (await dsh.prompt(session, "/status")).stop_reason == "end_turn"


async def main() -> None:
    for name, scenario in (
        ("editor-session.jsonl", record_editor_session),
        ("echo-agent-events.jsonl", _echo_with_agent_events),
    ):
        with tempfile.TemporaryDirectory(prefix="dsh-record-") as scratch:
            recording = Path(scratch) / name
            await scenario(Path(scratch), recording)
            shutil.copyfile(recording, HERE / name)
            print(f"wrote {HERE / name}")


if __name__ == "__main__":
    anyio.run(main)
