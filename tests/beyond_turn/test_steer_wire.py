"""Steering over the wire (issue #38 item 2, RFC 0036): ``_dsh/session/steer`` sent by the official SDK client to a
real ``dsh acp``, the model a loopback provider whose captured requests show what the model was told."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError, text_block
from acp.schema import UserMessageChunk

from tests.support.provider_server import Event, Recorded, Reply, serve
from tests.support.provider_wire import DONE, oa_chunk, oa_finish, oa_text_reply, oa_tool_delta, oa_usage
from tests.support.sdk import DshProcess, run_dsh

WAIT = 60.0
STEPS = 20
STEER = "use the second approach instead"
QUEUED = "and afterwards summarise"


def tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> Reply:
    return Reply(
        events=[
            oa_chunk({"role": "assistant", "content": None}),
            oa_tool_delta(0, json.dumps(arguments), call_id=call_id, name=name),
            oa_finish("tool_calls"),
            oa_usage(9, 4),
            DONE,
        ]
    )


def env_for(url: str) -> dict[str, str | None]:
    return {"OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": "test"}


def user_texts(body: dict[str, Any]) -> str:
    """Everything the request gave the model as user text (steering is a user message wrapped in a tag)."""
    texts = []
    for message in body["messages"]:
        if message["role"] != "user":
            continue
        content = message["content"]
        texts.append(content if isinstance(content, str) else " ".join(str(part.get("text", "")) for part in content))
    return "\n".join(texts)


@dataclass
class Gated(Event):
    """An event the server sends only once *gate* is set (the responder runs under the server's lock; the
    streaming of a reply does not)."""

    gate: threading.Event = field(default_factory=threading.Event)

    def encode(self) -> bytes:
        self.gate.wait(WAIT)
        return super().encode()


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
        if number < STEPS:
            reply = tool_call(f"call-{number}", "read_file", {"path": "notes.txt"})
        else:
            reply = Reply(events=oa_text_reply(f"answer {number}"))
        if number == self.hold:
            first = reply.events[0]
            reply.events[0] = Gated(first.data, first.event, first.delay, self.release)
        return reply


async def steer(daemon: DshProcess, session_id: str, text: str) -> dict[str, Any]:
    return await daemon.conn.ext_method(
        "dsh/session/steer",
        {"sessionId": session_id, "prompt": [text_block(text).model_dump(by_alias=True, exclude_none=True)]},
    )


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
