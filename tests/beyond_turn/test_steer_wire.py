"""Steering over the wire (issue #38 item 2, RFC 0036): ``_dsh/session/steer`` sent by the official SDK client to a
real ``dsh acp``, the model a loopback provider whose captured requests show what the model was told."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from acp import RequestError
from acp.schema import UserMessageChunk

from tests.beyond_turn.helpers import WAIT, env_for, gated, prompting, steer, text, tool_call, user_texts
from tests.support.provider_server import Recorded, Reply, serve
from tests.support.sdk import run_dsh

STEPS = 20
STEER = "use the second approach instead"
QUEUED = "and afterwards summarise"


class Scripted:
    """A responder: a *STEPS*-step turn of ``read_file`` calls ending in text, then text for every later request.
    The reply to request number *hold* (1-based) streams only once :attr:`release` is set."""

    def __init__(self, hold: int) -> None:
        self.hold = hold
        self.release = threading.Event()
        self.count = 0

    def __call__(self, recorded: Recorded) -> Reply:
        self.count += 1
        number = self.count
        reply = tool_call(f"call-{number}", "read_file", {"path": "notes.txt"}) if number < STEPS else text("done")
        return gated(reply, self.release) if number == self.hold else reply


async def test_a_steer_during_a_20_step_turn_reaches_the_next_step_and_a_prompt_still_queues(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    script = Scripted(hold=3)
    results: dict[str, Any] = {}
    with serve() as server:
        server.respond(script)
        async with run_dsh(tmp_path, "openai:test-model", env=env_for(server.url), agent_events=True) as daemon:
            with anyio.fail_after(WAIT):
                init = await daemon.initialize()
                assert (init.agent_capabilities.field_meta or {})["dsh.dev/steer"] == {"method": "_dsh/session/steer"}
                session_id = await daemon.new_session()

                async def run_prompt(key: str, text: str) -> None:
                    results[key] = await daemon.prompt(session_id, text)

                async def run_steer() -> None:
                    results["steer"] = await steer(daemon, session_id, STEER)

                async with anyio.create_task_group() as group:
                    group.start_soon(run_prompt, "first", "do the work")
                    await server.wait_requests(3, WAIT)  # step 3's request is being answered (and held)
                    mark = daemon.client.agent_events.mark()
                    group.start_soon(run_steer)
                    await daemon.client.agent_events.wait_for(session_id, "queued", after=mark, steering=True)
                    group.start_soon(run_prompt, "second", QUEUED)
                    await daemon.client.agent_events.wait_for(session_id, "queued", after=mark, steering=False)
                    script.release.set()
            assert results["steer"] == {"outcome": "steered", "turn": 1}
            assert results["first"].stop_reason == "end_turn"
            assert results["second"].stop_reason == "end_turn"
            assert daemon.response_index(daemon.prompt_request_id("do the work")) < daemon.response_index(
                daemon.prompt_request_id(QUEUED)
            )
        bodies = server.bodies()
    assert len(bodies) == STEPS + 1  # the steer joined the turn, it did not add a step; the queued prompt: one turn
    steered = [STEER in user_texts(body) for body in bodies]
    assert steered == [False] * 3 + [True] * (STEPS - 2)  # in the request of the step after the one it arrived in
    assert '<steering source="user">' in user_texts(bodies[3])
    queued = [QUEUED in user_texts(body) for body in bodies]
    assert queued == [False] * STEPS + [True]  # a plain prompt still waits for its own turn

    # session/load replays the prompt, the steer (marked) and the queued prompt, in that order
    async with run_dsh(tmp_path, "openai:test-model", env=env_for("http://127.0.0.1:9"), name="second") as again:
        with anyio.fail_after(WAIT):
            await again.initialize()
            await again.conn.load_session(session_id=session_id, cwd=str(tmp_path), mcp_servers=[])
        chunks = [u for u in again.client.of(session_id) if isinstance(u, UserMessageChunk)]
        assert [c.content.text for c in chunks] == ["do the work", STEER, QUEUED]  # type: ignore[union-attr]
        assert [(c.field_meta or {}).get("dsh", {}).get("steer") for c in chunks] == [None, True, None]


async def test_a_steer_when_no_turn_runs_is_refused_with_reason_idle(tmp_path: Path) -> None:
    async with run_dsh(tmp_path) as daemon:
        with anyio.fail_after(WAIT):
            session_id = await daemon.start()
            with pytest.raises(RequestError) as refused:
                await steer(daemon, session_id, STEER)
    assert refused.value.code == -32602
    assert (refused.value.data or {})["reason"] == "idle"


async def test_cancel_while_a_steer_is_pending_answers_it_cancelled_with_its_text(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    script = Scripted(hold=2)
    results: dict[str, Any] = {}
    with serve() as server:
        server.respond(script)
        async with run_dsh(tmp_path, "openai:test-model", env=env_for(server.url), agent_events=True) as daemon:
            with anyio.fail_after(WAIT):
                session_id = await daemon.start()

                async def run_prompt() -> None:
                    results["prompt"] = await daemon.prompt(session_id, "do the work")

                async def run_steer() -> None:
                    results["steer"] = await steer(daemon, session_id, STEER)

                async with anyio.create_task_group() as group:
                    group.start_soon(run_prompt)
                    await server.wait_requests(2, WAIT)  # step 2's request is held
                    mark = daemon.client.agent_events.mark()
                    group.start_soon(run_steer)
                    await daemon.client.agent_events.wait_for(session_id, "queued", after=mark, steering=True)
                    await daemon.conn.cancel(session_id=session_id)
                    await daemon.client.agent_events.wait_idle(session_id, after=mark)
                    script.release.set()
            assert results["prompt"].stop_reason == "cancelled"
            assert results["steer"]["outcome"] == "cancelled"
            assert results["steer"]["prompt"] == [{"type": "text", "text": STEER}]
        bodies = server.bodies()
    assert not any(STEER in user_texts(body) for body in bodies)  # never sent to the model: the client has it back


async def test_steer_frames_and_their_replay_validate_against_the_acp_json_schemas(tmp_path: Path) -> None:
    """Through the schema-checking client of ``tests/support/acp_schema.py``: the initialize answer that
    advertises the request, the live turn a steer joined, and the load that replays it (a marked user chunk)."""
    from tests.support.acp_schema import modern_client
    from tests.support.raw import write_script

    (tmp_path / "notes.txt").write_text("hello\n")
    words = " ".join(f"w{n}" for n in range(1, 41))
    read = {"name": "read_file", "arguments": {"path": "notes.txt"}}
    model = write_script(
        tmp_path, [{"text": words, "delay": 0.05, "tool_calls": [read]}, {"text": "done"}, {"text": "more"}]
    )
    async with modern_client(tmp_path, model) as (client, init):
        assert init["agentCapabilities"]["_meta"]["dsh.dev/steer"] == {"method": "_dsh/session/steer"}
        with anyio.fail_after(WAIT):
            session = await client.new_session(tmp_path)
            prompt_id = await client.send_request(
                "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "read it"}]}
            )
            await client.wait_for(
                lambda m: (
                    m.get("method") == "session/update"
                    and m["params"]["update"].get("sessionUpdate") == "agent_message_chunk"
                ),
                WAIT,
            )
            steered = await client.call(
                "_dsh/session/steer", {"sessionId": session, "prompt": [{"type": "text", "text": STEER}]}
            )
            assert steered == {"outcome": "steered", "turn": 1}
            assert (await client.response(prompt_id))["result"]["stopReason"] == "end_turn"
    async with modern_client(tmp_path, model, name="second.log") as (client, _):
        with anyio.fail_after(WAIT):
            await client.call("session/load", {"sessionId": session, "cwd": str(tmp_path), "mcpServers": []})
        chunks = [u for u in client.updates(session) if u["sessionUpdate"] == "user_message_chunk"]
        assert [c["content"]["text"] for c in chunks] == ["read it", STEER]
        assert chunks[1]["_meta"] == {"dsh": {"steer": True}}


async def test_a_steer_the_ending_turn_cannot_take_opens_the_next_turn_and_is_answered_queued(tmp_path: Path) -> None:
    import os

    holding, gate = tmp_path / "holding.fifo", tmp_path / "gate.fifo"
    os.mkfifo(holding)
    os.mkfifo(gate)
    results: dict[str, Any] = {}
    with serve() as server:
        server.script(text("first answer"), text("answer to the steer"))
        env = {**env_for(server.url), "DSH_TEST_HOLDING": str(holding), "DSH_TEST_GATE": str(gate)}
        plugins = ["tests.beyond_turn.hold_plugin:plugin"]
        async with run_dsh(tmp_path, "openai:test-model", env=env, plugins=plugins, agent_events=True) as daemon:
            with anyio.fail_after(WAIT):
                session_id = await daemon.start()

                async def run_steer() -> None:
                    results["steer"] = await steer(daemon, session_id, STEER)

                async with prompting(daemon, session_id, "do the work") as answers:
                    await anyio.to_thread.run_sync(lambda: holding.read_text())  # the turn's end is held
                    mark = daemon.client.agent_events.mark()
                    async with anyio.create_task_group() as group:
                        group.start_soon(run_steer)
                        await daemon.client.agent_events.wait_for(session_id, "queued", after=mark, steering=True)
                        await anyio.to_thread.run_sync(lambda: os.close(os.open(gate, os.O_WRONLY)))
                await daemon.client.agent_events.wait_idle(session_id, after=mark)
            assert answers[0].stop_reason == "end_turn"
            assert results["steer"] == {"outcome": "queued", "turn": 2}
            assert "answer to the steer" in daemon.client.text(session_id)
        bodies = server.bodies()
    assert len(bodies) == 2
    assert STEER not in user_texts(bodies[0])
    assert STEER in user_texts(bodies[1]) and "<steering" not in user_texts(bodies[1])  # a prompt of its own
