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


async def _openai_provider(tmp_path: Path, recording: Path) -> None:
    """An OpenAI-compatible server on 127.0.0.1 (the provider's real streaming wire): a tool call (whose result
    does not depend on the directory: the file does not exist anywhere), then text. Replaying it needs neither
    the server nor a key."""
    from tests.support.provider_server import Reply, serve
    from tests.support.provider_wire import DONE, oa_chunk, oa_finish, oa_text_reply, oa_tool_delta, oa_usage

    with serve() as server:
        server.script(
            Reply(
                events=[
                    oa_chunk({"role": "assistant", "content": None}),
                    oa_tool_delta(0, "", "call_read", "read_file"),
                    oa_tool_delta(0, '{"path": "missing.txt"}'),
                    oa_finish("tool_calls"),
                    oa_usage(120, 9),
                    DONE,
                ]
            ),
            Reply(events=oa_text_reply("There is ", "no such file.", prompt=150, completion=5)),
        )
        env = {"DSH_RECORD": str(recording), "OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "sk-recorded"}
        async with run_dsh(tmp_path, "openai:gpt-4.1", env=env) as dsh:
            session = await dsh.start()
            assert (await dsh.prompt(session, "what is in missing.txt?")).stop_reason == "end_turn"


async def main() -> None:
    for name, scenario in (
        ("editor-session.jsonl", record_editor_session),
        ("echo-agent-events.jsonl", _echo_with_agent_events),
        ("openai-provider.jsonl", _openai_provider),
    ):
        with tempfile.TemporaryDirectory(prefix="dsh-record-") as scratch:
            recording = Path(scratch) / name
            await scenario(Path(scratch), recording)
            shutil.copyfile(recording, HERE / name)
            print(f"wrote {HERE / name}")


if __name__ == "__main__":
    anyio.run(main)
