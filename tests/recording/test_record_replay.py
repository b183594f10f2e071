"""``dsh acp --record`` and ``dsh replay`` (RFC 0020): a session recorded through the official SDK client replays
exactly; a changed tool output fails the replay with a diff naming the frame; no key reaches a recording."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import anyio
import pytest

from tests.support.env import SRC
from tests.support.provider_server import Reply, serve
from tests.support.provider_wire import oa_text_reply
from tests.support.recordings import record_editor_session, run_replay
from tests.support.sdk import run_dsh

pytestmark = pytest.mark.anyio


NUMBERED = 'entry = f"{offset + index:>6}\\t{line}"'


def _number_lines_differently(scratch: Path) -> None:
    """In the scratch copy, read_file numbers its lines ``1: text`` instead of ``     1\ttext``."""
    holders = [path for path in (scratch / "dsh" / "tools").glob("*.py") if NUMBERED in path.read_text("utf-8")]
    assert len(holders) == 1, holders
    source = holders[0].read_text(encoding="utf-8")
    holders[0].write_text(source.replace(NUMBERED, 'entry = f"{offset + index}: {line}"'), encoding="utf-8")


def _entries(recording: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in recording.read_text(encoding="utf-8").splitlines()]


async def test_a_recorded_session_replays_exactly_and_a_changed_tool_output_is_named(tmp_path: Path) -> None:
    recording = tmp_path / "session.jsonl"
    await record_editor_session(tmp_path, recording)
    entries = _entries(recording)
    assert entries[0]["kind"] == "header" and entries[0]["format"] == "dsh-recording"
    frames = [e for e in entries if e["kind"] == "frame"]
    methods = [(e["dir"], e["frame"].get("method")) for e in frames]  # type: ignore[union-attr]
    for expected in [
        ("in", "session/prompt"),
        ("out", "session/request_permission"),
        ("out", "fs/read_text_file"),
        ("out", "terminal/create"),
        ("in", "session/cancel"),
        ("in", "session/load"),
    ]:
        assert expected in methods, expected
    assert entries[-1]["kind"] == "eof" or any(e["kind"] == "eof" for e in entries)
    chunks = [e for e in entries if e["kind"] == "model-chunk"]
    assert any(e.get("aborted") for e in entries if e["kind"] == "model-end"), "the cancelled reply is marked"
    assert {c["chunk"]["type"] for c in chunks} >= {"tool-call-delta", "text-delta", "usage", "finish"}  # type: ignore[index]

    # A scratch copy of dsh whose read_file numbers lines differently: the replay names the tool call's update.
    scratch = tmp_path / "scratch"
    shutil.copytree(SRC / "dsh", scratch / "dsh", ignore=shutil.ignore_patterns("__pycache__"))
    _number_lines_differently(scratch)
    project = str(tmp_path / "project")
    results: dict[str, subprocess.CompletedProcess[str]] = {}

    async def replay_with(name: str, src: Path | None) -> None:
        results[name] = await anyio.to_thread.run_sync(
            lambda: run_replay(tmp_path, recording, "--cwd", project, src=src)
        )

    async with anyio.create_task_group() as group:  # two independent daemons: run side by side
        group.start_soon(replay_with, "same", None)
        group.start_soon(replay_with, "changed", scratch)
    replayed, changed = results["same"], results["changed"]
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    sent = sum(1 for e in frames if e["dir"] == "in")  # every client frame was sent, every daemon frame matched
    outs = len(frames) - sent
    assert replayed.stdout.startswith(f"ok: replayed: {sent} client frames, {outs} daemon frames"), replayed.stdout
    assert changed.returncode == 1, changed.stdout + changed.stderr
    report = changed.stdout
    assert report.startswith("replay differs: "), report
    assert "session/update tool_call_update (r1)" in report, report
    assert "recording line" in report and "after client frame" in report, report
    assert '-            "text": "     1\\ta draft"' in report, report
    assert '+            "text": "1: a draft"' in report, report

    # --update takes what the changed dsh sends as the new expectation, which it then meets.
    updated = run_replay(tmp_path, recording, "--cwd", project, "--update", src=scratch)
    assert updated.returncode == 0 and updated.stdout.startswith("updated "), updated.stdout + updated.stderr
    assert "1: a draft" in recording.read_text(encoding="utf-8")
    again = run_replay(tmp_path, recording, "--cwd", project, src=scratch)
    assert again.returncode == 0, again.stdout + again.stderr


async def test_no_provider_key_reaches_a_recording(tmp_path: Path) -> None:
    env_key = "sk-env-0123456789abcdef"
    file_key = "sk-file-fedcba9876543210"
    config = tmp_path / "config.yaml"
    config.write_text(f"providers:\n  deepseek: {{api_key: {file_key}}}\n", encoding="utf-8")
    recording = tmp_path / "keys.jsonl"
    env = {"DSH_RECORD": str(recording), "OPENAI_API_KEY": env_key, "DSH_CONFIG": str(config)}
    async with run_dsh(tmp_path, "echo", env=env) as dsh:
        session = await dsh.start()
        text = f"my keys are {env_key} and {file_key}"
        answer = await dsh.prompt(session, text)
        assert answer.stop_reason == "end_turn"
        with anyio.fail_after(10):
            await dsh.client.wait_until(lambda: env_key in dsh.client.text(session))  # echoed, unredacted, live
    written = recording.read_text(encoding="utf-8")
    assert env_key not in written and file_key not in written
    assert "[redacted OPENAI_API_KEY]" in written and "[redacted providers.deepseek.api_key]" in written
    kinds = {json.loads(line)["kind"] for line in written.splitlines()}
    assert {"frame", "model-chunk"} <= kinds
    assert recording.stat().st_mode & 0o777 == 0o600


async def test_a_real_provider_run_replays_without_its_key_or_its_server(tmp_path: Path) -> None:
    """An OpenAI-compatible provider on 127.0.0.1: the recording holds its chunks (the key the reply quotes
    redacted), and the replay needs neither the key nor the server (which gets no second request)."""
    key = "sk-loopback-0123456789abcdef"
    recording = tmp_path / "provider.jsonl"
    with serve() as server:
        server.script(Reply(events=oa_text_reply("Your key ", f"is {key}.")))
        env = {"DSH_RECORD": str(recording), "OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": key}
        async with run_dsh(tmp_path, "openai:test-model", env=env) as dsh:
            session = await dsh.start()
            assert (await dsh.prompt(session, "what is my key?")).stop_reason == "end_turn"
        assert len(server.requests) == 1
        written = recording.read_text(encoding="utf-8")
        assert key not in written and "[redacted OPENAI_API_KEY]" in written
        assert '"model":"openai:test-model"' in written
        replayed = await anyio.to_thread.run_sync(
            lambda: run_replay(tmp_path, recording, env={"OPENAI_BASE_URL": f"{server.url}/v1"})
        )
        assert replayed.returncode == 0, replayed.stdout + replayed.stderr
        assert len(server.requests) == 1, "the replay called the provider"


async def test_a_recording_that_loads_an_older_session_carries_it(tmp_path: Path) -> None:
    """The bug-report case: the editor loads a session made before the recording started. The recording holds
    that session's file as it was when loaded, so the replay (with an empty data directory) loads the same."""
    async with run_dsh(tmp_path, "echo", name="before") as dsh:
        session = await dsh.start()
        assert (await dsh.prompt(session, "an older conversation")).stop_reason == "end_turn"
    recording = tmp_path / "load.jsonl"
    async with run_dsh(tmp_path, "echo", env={"DSH_RECORD": str(recording)}) as dsh:
        await dsh.initialize()
        await dsh.conn.load_session(cwd=str(dsh.cwd), session_id=session, mcp_servers=[])
        assert (await dsh.prompt(session, "and a new prompt")).stop_reason == "end_turn"
    entries = _entries(recording)
    carried = [e for e in entries if e["kind"] == "session-file"]
    assert [e["sessionId"] for e in carried] == [session]
    assert "an older conversation" in json.dumps(carried[0]["lines"])
    assert "and a new prompt" not in json.dumps(carried[0]["lines"])  # the file as it was when loaded
    replayed = await anyio.to_thread.run_sync(lambda: run_replay(tmp_path, recording))
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr


def test_replay_refuses_a_file_that_is_not_a_recording(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.jsonl"
    bogus.write_text('{"jsonrpc": "2.0"}\n', encoding="utf-8")
    result = run_replay(tmp_path, bogus)
    assert result.returncode == 2
    assert "not a dsh recording" in result.stderr and str(bogus) in result.stderr
