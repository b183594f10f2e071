"""SIGKILL mid-stream, then a fresh daemon: the session loads, its last turn is closed ``interrupted`` on disk, and
a new prompt works.

Each case runs one daemon per kill. Daemon 1 answers a warm-up prompt, then streams a scripted answer (reasoning,
text, calls to unknown tools, a small ``delay`` between chunks, then a model call that hangs) to a second prompt and
is SIGKILLed from the client's receive loop right after a chosen number of that prompt's updates arrived (20 points,
fixed seed). Two more
cases use the test plugin ``crash_now`` (see ``_tools.py``), which flushes and SIGKILLs the daemon from inside a
tool call, so the kill lands exactly between a ``tool/call`` and its ``tool/result``.

The session file as the kill left it is read before daemon 2 touches it; the repair daemon 2 makes on load is
checked against it line by line, independently of the daemon's own scan.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError, text_block
from acp.schema import PromptResponse

from tests.acp_durable._tools import CRASH_PLUGIN
from tests.support.durable import (
    assert_contiguous,
    read_session,
    run_daemon,
    session_path,
    turn_starts,
    write_script,
)

SEED = 0xD5C0
RANDOM_KILLS = 20
DELAY = 0.003

WARM = "warm up"
WARM_ANSWER = "ready when you are"
PROMPT = "tell me a long story"
AFTER = "are you still there"
AFTER_ANSWER = "yes, still here after the crash"
UNKNOWN_TOOLS = ["read_notes", "run_tests", "search_index", "no_such_tool"]
VOCABULARY = ["alpha", "beta", "gamma", "délta", "ε", "日本語", "zeta", "eta", "theta", "iota", "kappa", "lambda"]


@dataclass(frozen=True)
class KillPoint:
    steps: list[dict[str, Any]]
    kill_after: int | None
    """Kill once this many updates of the prompt were received; ``None``: the ``crash_now`` tool kills."""


def _words(rng: random.Random, count: int) -> str:
    return " ".join(rng.choice(VOCABULARY) for _ in range(count))


def _random_point(rng: random.Random) -> KillPoint:
    """Streaming steps, each ending in calls to unknown tools, then a step that hangs: the turn cannot end on its
    own, so however late the kill arrives (frames reach the client in batches, the client can lag), it lands in
    the turn. Kill points run from the first update to the last (then the daemon is waiting for the model)."""
    steps: list[dict[str, Any]] = []
    updates = 0
    for index in range(rng.randint(2, 4)):
        step: dict[str, Any] = {"delay": DELAY}
        if rng.random() < 0.6:
            reasoning = rng.randint(1, 8)
            step["reasoning"] = _words(rng, reasoning)
            updates += reasoning
        text = rng.randint(3, 20)
        step["text"] = _words(rng, text)
        updates += text
        calls = rng.randint(1, 2)
        step["tool_calls"] = [
            {"name": rng.choice(UNKNOWN_TOOLS), "arguments": {"path": f"notes/{index}-{n}.md", "n": n}}
            for n in range(calls)
        ]
        updates += 2 * calls  # tool_call, then tool_call_update (failed: unknown tool)
        steps.append(step)
    steps.append({"hang": True})
    return KillPoint(steps, rng.randint(1, updates))


def _points() -> list[Any]:
    rng = random.Random(SEED)
    points = [pytest.param(_random_point(rng), id=f"random-{n:02d}") for n in range(RANDOM_KILLS)]
    points.append(
        pytest.param(
            KillPoint([{"text": "let me crash", "tool_calls": [{"name": "crash_now", "arguments": {}}]}], None),
            id="in-tool-only-call",
        )
    )
    points.append(
        pytest.param(
            KillPoint(
                [
                    {"text": "one step done", "tool_calls": [{"name": "read_notes", "arguments": {"path": "a"}}]},
                    {
                        "reasoning": "now two calls",
                        "text": "and then a crash",
                        "tool_calls": [
                            {"name": "search_index", "arguments": {"q": "x"}},
                            {"name": "crash_now", "arguments": {}},
                        ],
                    },
                ],
                None,
            ),
            id="in-tool-second-call",
        )
    )
    return points


def _parse_snapshot(content: bytes) -> tuple[list[bytes], list[dict[str, Any]]]:
    """The complete, parseable lines of a file as a kill left it: a final line without newline (or not JSON) is
    what repair must cut."""
    *complete, _tail = content.split(b"\n")
    lines = list(complete)
    if lines:
        try:
            json.loads(lines[-1])
        except ValueError:
            lines.pop()
    parsed = [json.loads(line) for line in lines]
    return lines, parsed[1:]


def _open_state(events: list[dict[str, Any]]) -> tuple[int, list[dict[str, Any]], dict[str, Any] | None]:
    """For a log whose last turn has no ``turn/end``: that turn, its calls without a result, its open step."""
    starts = [i for i, e in enumerate(events) if e["type"] == "turn/start"]
    assert starts, "no turn on disk"
    last = starts[-1]
    assert all(e["type"] != "turn/end" for e in events[last:]), "the killed turn was closed before the kill"
    calls: dict[str, dict[str, Any]] = {}
    step: dict[str, Any] | None = None
    for event in events[last:]:
        data = event["data"]
        if event["type"] == "tool/call":
            calls[data["call_id"]] = data
        elif event["type"] == "tool/result":
            calls.pop(data["call_id"], None)
        elif event["type"] == "step/start":
            step = data
        elif event["type"] == "step/end":
            step = None
    return events[last]["data"]["turn"], list(calls.values()), step


def _split_turns(updates: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    turns: list[tuple[str, list[dict[str, Any]]]] = []
    for update in updates:
        if update["sessionUpdate"] == "user_message_chunk":
            turns.append((update["content"]["text"], []))
        else:
            assert turns, f"an update before any user_message_chunk: {update!r}"
            turns[-1][1].append(update)
    return turns


def _text(updates: list[dict[str, Any]]) -> str:
    return "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk")


@pytest.mark.parametrize("point", _points())
async def test_sigkill_mid_stream_then_load_repairs_and_continues(tmp_path: Path, point: KillPoint) -> None:
    data = tmp_path / "data"
    project = tmp_path / "project"
    project.mkdir()

    # -- daemon 1: a completed turn, then a kill in the middle of the second ---------------------------------
    model = write_script(tmp_path / "killed.json", [{"text": WARM_ANSWER}, *point.steps])
    plugins = [CRASH_PLUGIN] if point.kill_after is None else []
    async with run_daemon(tmp_path, data, model=model, plugins=plugins, name="killed") as daemon:
        session_id = await daemon.start(project)
        assert (await daemon.prompt(session_id, WARM)).stop_reason == "end_turn"
        mark = daemon.mark()
        received = 0

        def kill_at(message: dict[str, Any]) -> None:
            nonlocal received
            if message.get("method") == "session/update" and message["params"]["sessionId"] == session_id:
                received += 1
                if received == point.kill_after:
                    daemon.kill()

        daemon.client.on_incoming = kill_at
        outcome: list[PromptResponse | Exception] = []

        async def prompt() -> None:
            try:
                outcome.append(await daemon.conn.prompt(session_id=session_id, prompt=[text_block(PROMPT)]))
            except Exception as exc:  # the connection dies with the daemon
                outcome.append(exc)

        async with anyio.create_task_group() as group:
            group.start_soon(prompt)
            await daemon.wait_killed()
        assert len(outcome) == 1 and not isinstance(outcome[0], PromptResponse), f"the prompt was answered: {outcome}"
        live = daemon.updates_in(mark, session_id=session_id)
        if point.kill_after is not None:
            assert len(live) >= point.kill_after

    snapshot = session_path(data, session_id).read_bytes()
    lines, on_disk = _parse_snapshot(snapshot)
    assert_contiguous(on_disk)
    turn, open_calls, open_step = _open_state(on_disk)
    assert turn == 2
    if point.kill_after is None:
        assert [c["name"] for c in open_calls] == ["crash_now"], "the crash tool's call should be the open one"

    # -- daemon 2: load (replay, repair), then a new prompt ---------------------------------------------------
    model = write_script(tmp_path / "after.json", [{"text": AFTER_ANSWER}])
    async with run_daemon(tmp_path, data, model=model, name="fresh") as daemon:
        await daemon.initialize()
        mark = daemon.mark()
        await daemon.load(session_id, project)
        answered = daemon.response_index("session/load", mark)
        replay = daemon.updates_in(mark, session_id=session_id)
        assert daemon.updates_in(mark, answered, session_id) == replay, "updates after the load answer"

        # The file: the sound prefix, then exactly the closers of the interrupted turn, durable before the answer.
        header, repaired = read_session(data, session_id)
        assert header == json.loads(lines[0])
        assert_contiguous(repaired)
        assert repaired[: len(on_disk)] == on_disk, "repair changed the stored history"
        closers = repaired[len(on_disk) :]
        expected_types = ["tool/result"] * len(open_calls) + (["step/end"] if open_step else []) + ["turn/end"]
        assert [c["type"] for c in closers] == expected_types
        for closer, call in zip(closers, open_calls, strict=False):
            data_ = closer["data"]
            assert (data_["call_id"], data_["turn"], data_["step"]) == (call["call_id"], 2, call["step"])
            assert data_["is_error"] is True and data_["error"]["code"] == "interrupted"
            assert data_["content"] and data_["content"][0]["type"] == "text"
        if open_step is not None:
            assert closers[len(open_calls)]["data"] == {"turn": 2, "step": open_step["step"]}
        assert closers[-1]["data"] == {"turn": 2, "reason": {"kind": "interrupted"}}

        # The replay: both turns, and it ends with the interrupted one.
        turns = _split_turns(replay)
        assert [text for text, _ in turns] == [WARM, PROMPT]
        assert _text(turns[0][1]) == WARM_ANSWER
        interrupted = turns[1][1]
        ids = {u["messageId"] for u in interrupted if "messageId" in u}
        assert all(i.startswith(("m2.", "t2.")) for i in ids), ids
        closing_updates = [
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": c["data"]["call_id"],
                "status": "failed",
                "content": [{"type": "content", "content": c["data"]["content"][0]}],
            }
            for c in closers[: len(open_calls)]
        ]
        # ... then the interrupted turn's end, marked for the client (issue 43: a resumed turn shows how it ended).
        turn_end = [{"sessionUpdate": "session_info_update", "_meta": {"dsh": {"turnEnd": "interrupted"}}}]
        stored = interrupted[: len(interrupted) - len(closing_updates) - len(turn_end)]
        assert interrupted[len(stored) :] == closing_updates + turn_end
        # What was stored replays as it streamed: the stored updates and the live ones agree on their common part.
        common = min(len(stored), len(live))
        assert stored[:common] == live[:common]
        kinds = [
            e["data"]["chunk"]["type"] for e in on_disk if e["type"] == "assistant/chunk" and e["data"]["turn"] == 2
        ]
        chunks = [u for u in stored if u["sessionUpdate"] in ("agent_message_chunk", "agent_thought_chunk")]
        assert len(chunks) == sum(k in ("text-delta", "reasoning-delta") for k in kinds)
        turn_events = [e for e in on_disk if e["data"].get("turn") == 2]
        assert sum(u["sessionUpdate"] == "tool_call" for u in stored) == sum(
            e["type"] == "tool/call" for e in turn_events
        )

        # A new prompt works and continues the numbering.
        mark = daemon.mark()
        response = await daemon.prompt(session_id, AFTER)
        assert response.stop_reason == "end_turn"
        fresh = daemon.updates_in(mark, session_id=session_id)
        assert _text(fresh) == AFTER_ANSWER
        assert {u["messageId"] for u in fresh} == {"m3.1"}

    _, final = read_session(data, session_id)
    assert_contiguous(final)
    assert final[: len(repaired)] == repaired
    assert turn_starts(final) == [1, 2, 3]
    assert final[-1]["data"] == {"turn": 3, "reason": {"kind": "completed"}}


async def _stored_conversation(tmp_path: Path, data: Path, project: Path) -> str:
    async with run_daemon(tmp_path, data, name="writer") as daemon:
        session_id = await daemon.start(project)
        for text in ("one two three", "four five"):
            assert (await daemon.prompt(session_id, text)).stop_reason == "end_turn"
    return session_id


async def test_torn_final_line_is_cut_and_an_open_turn_closed(tmp_path: Path) -> None:
    data, project = tmp_path / "data", tmp_path / "project"
    project.mkdir()
    session_id = await _stored_conversation(tmp_path, data, project)
    path = session_path(data, session_id)
    clean = path.read_bytes()
    lines = clean.split(b"\n")[:-1]
    assert json.loads(lines[-1])["type"] == "turn/end"
    # As if the process died while writing: the last turn's turn/end never made it, a chunk line is half written.
    sound = b"".join(line + b"\n" for line in lines[:-1])
    path.write_bytes(sound + b'{"type":"assistant/chunk","seq":')
    _, kept = _parse_snapshot(sound)

    async with run_daemon(tmp_path, data, name="repairer") as daemon:
        await daemon.initialize()
        mark = daemon.mark()
        await daemon.load(session_id, project)
        texts = [u["content"]["text"] for u in daemon.updates_in(mark) if u["sessionUpdate"] == "user_message_chunk"]
        assert texts == ["one two three", "four five"]
        _, repaired = read_session(data, session_id)
        assert repaired[:-1] == kept
        assert repaired[-1]["type"] == "turn/end"
        assert repaired[-1]["data"] == {"turn": 2, "reason": {"kind": "interrupted"}}
        assert path.read_bytes().startswith(sound)
        assert (await daemon.prompt(session_id, "six")).stop_reason == "end_turn"
    _, final = read_session(data, session_id)
    assert_contiguous(final)
    assert turn_starts(final) == [1, 2, 3]


async def test_corrupt_middle_line_is_a_clear_error_and_the_file_is_left_alone(tmp_path: Path) -> None:
    data, project = tmp_path / "data", tmp_path / "project"
    project.mkdir()
    session_id = await _stored_conversation(tmp_path, data, project)
    path = session_path(data, session_id)
    lines = path.read_bytes().split(b"\n")
    lines[4] = b'{"type": "assistant/chunk", "seq": oops}'  # line 5 of the file, well inside the committed part
    corrupt = b"\n".join(lines)
    path.write_bytes(corrupt)

    async with run_daemon(tmp_path, data, name="reader") as daemon:
        await daemon.initialize()
        for method in ("load", "resume"):
            mark = daemon.mark()
            with pytest.raises(RequestError) as raised:
                await getattr(daemon, method)(session_id, project)
            error = raised.value
            assert error.code == -32603, (error.code, str(error))
            assert isinstance(error.data, dict)
            assert error.data.get("reason") == "corrupt" and error.data.get("sessionId") == session_id
            assert f"{path}:5" in str(error), str(error)
            assert daemon.updates_in(mark) == []
            assert path.read_bytes() == corrupt
