"""The driver yields to the event loop while streaming, so an adapter that never awaits cannot starve the
process (the ACP reader that brings ``session/cancel`` must run mid-stream)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio

from dsh import events as ev
from dsh.kernel import Context
from dsh.services.agents import Agent, AgentOptions
from dsh.services.llm import GenerateRequest, StreamChunk

CHUNKS = 2000


async def greedy(request: GenerateRequest) -> AsyncIterator[StreamChunk]:
    """Never awaits: every chunk is ready at once."""
    for index in range(CHUNKS):
        yield {"type": "text-delta", "text": f"w{index} "}
    yield {"type": "finish", "reason": {"kind": "stop"}}


async def test_another_task_runs_while_a_never_awaiting_adapter_streams(core: Context) -> None:
    core.llm.register_adapter(["greedy"], greedy)
    seen: list[int] = []
    chunks = 0

    def count(agent: Agent, turn: int, step: int, chunk: StreamChunk) -> None:
        nonlocal chunks
        chunks += 1

    core.on(ev.AGENT_STREAM_CHUNK, count)

    async def observer() -> None:
        while True:
            await anyio.lowlevel.checkpoint()
            seen.append(chunks)

    agent = core.agent_loop.create("fair", AgentOptions(model="greedy"))
    async with anyio.create_task_group() as group:
        group.start_soon(observer)
        agent.send([{"type": "text", "text": "go"}])
        with anyio.fail_after(5):
            await agent.when_idle()
        group.cancel_scope.cancel()
    mid_stream = [n for n in seen if 0 < n < CHUNKS]
    assert mid_stream, "the observer never ran while the stream was in progress"


async def test_cancel_from_another_task_lands_mid_stream(core: Context) -> None:
    core.llm.register_adapter(["greedy"], greedy)
    agent = core.agent_loop.create("cancelled", AgentOptions(model="greedy"))
    started = anyio.Event()

    def on_chunk(agent: Agent, turn: int, step: int, chunk: StreamChunk) -> None:
        started.set()

    core.on(ev.AGENT_STREAM_CHUNK, on_chunk)

    async def canceller() -> None:
        await started.wait()
        agent.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(canceller)
        agent.send([{"type": "text", "text": "go"}])
        with anyio.fail_after(5):
            await agent.when_idle()
    chunks = [e for e in agent.session.events if e.type == "assistant/chunk"]
    end = [e for e in agent.session.events if e.type == "turn/end"][-1]
    assert end.data["reason"] == {"kind": "aborted", "reason": "cancelled"}
    assert len(chunks) < CHUNKS
