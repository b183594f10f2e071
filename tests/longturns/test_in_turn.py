"""Inside a running turn: a provider overflow compacts at a step boundary and retries the step once; a cancel
while that summary is being written leaves the history as it was (in process, loopback provider over HTTP)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio

from dsh.services.agents import AgentOptions
from tests.longturns.test_calibration import MODEL, core
from tests.support.provider_server import FakeProvider, Reply
from tests.support.provider_wire import DONE, oa_chunk, oa_finish, oa_text_reply, oa_tool_delta, oa_usage

OVERFLOW = Reply(
    status=400,
    body={"error": {"message": "maximum context length exceeded", "code": "context_length_exceeded"}},
)


def bulk_call(call_id: str, size: int = 8_000) -> Reply:
    return Reply(
        events=[
            oa_chunk({"role": "assistant", "content": None}),
            oa_tool_delta(0, json.dumps({"size": size, "label": call_id}), call_id, "bulk"),
            oa_finish("tool_calls"),
            oa_usage(100, 10),
            DONE,
        ]
    )


async def test_an_overflow_mid_turn_compacts_at_a_step_boundary_and_retries_once(
    server: FakeProvider, tmp_path: Path
) -> None:
    server.script(
        bulk_call("c1"),
        bulk_call("c2"),
        bulk_call("c3"),
        OVERFLOW,
        Reply(events=oa_text_reply("Summary: read c1 and c2.")),
        Reply(events=oa_text_reply("finished")),
    )
    async with core(server, tmp_path) as ctx:
        handle = await ctx.agents.create(
            agent_id="s", session_id="s", meta={"cwd": str(tmp_path)}, agent_options=AgentOptions(model=MODEL)
        )
        handle.agent.send([{"type": "text", "text": "go"}])
        with anyio.fail_after(20):
            await handle.agent.when_idle()
        session = handle.agent.session
        end = session.last("turn/end")
        assert end is not None and end.data["reason"] == {"kind": "completed"}
        [compaction] = [e.data for e in session.events if e.type == "context/compaction"]
        assert compaction["trigger"] == "overflow"
        steps = [e.seq for e in session.events if e.type == "step/start"]
        assert compaction["upto"] in steps  # a step boundary
        retried = [m for m in server.bodies()[5]["messages"] if m["role"] != "system"]
        assert retried[0]["role"] == "user" and "Summary: read c1 and c2." in retried[0]["content"]
        assert retried[1] == {"role": "user", "content": "go"}  # the request, kept verbatim after the summary
        assert retried[-1]["role"] == "tool" and retried[-1]["tool_call_id"] == "c3"  # the newest step verbatim
        assert "c1" not in json.dumps(retried[2:])  # the oldest step summarised
        await handle.dispose()


async def test_cancel_while_summarising_inside_a_turn_leaves_history_as_it_was(
    server: FakeProvider, tmp_path: Path
) -> None:
    server.script(bulk_call("c1"), bulk_call("c2"), OVERFLOW, Reply(events=[], hang=True))
    async with core(server, tmp_path) as ctx:
        handle = await ctx.agents.create(
            agent_id="s", session_id="s", meta={"cwd": str(tmp_path)}, agent_options=AgentOptions(model=MODEL)
        )
        handle.agent.send([{"type": "text", "text": "go"}])
        await server.wait_requests(4)  # the summary request is in flight
        before = handle.agent.session.derive_messages()
        handle.agent.cancel()
        with anyio.fail_after(10):
            await handle.agent.when_idle()
        session = handle.agent.session
        end = session.last("turn/end")
        assert end is not None and end.data["reason"]["kind"] == "aborted"
        assert not [e for e in session.events if e.type in ("context/compaction", "context/prune")]
        assert session.derive_messages() == before
        await handle.dispose()
