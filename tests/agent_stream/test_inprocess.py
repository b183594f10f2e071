"""The agent stream in-process: off until started (no listener at all), and a failing sender never breaks a turn."""

from __future__ import annotations

from typing import Any

import anyio

from dsh import events as ev
from dsh.agent_stream import AgentStream
from dsh.app import load_core
from dsh.kernel import App
from dsh.services.agents import AgentOptions


async def run_turn(app: App) -> None:
    handle = await app.ctx.agents.create(agent_id="a1", session_id="s1", agent_options=AgentOptions(model="echo"))
    handle.agent.send([{"type": "text", "text": "hi there"}])
    with anyio.fail_after(10):
        await handle.agent.when_idle()
    await handle.dispose()


async def test_off_means_no_listener_and_on_sends_in_loop_order() -> None:
    sent: list[tuple[str, dict[str, Any]]] = []
    async with App() as app:
        load_core(app.ctx)
        before = {name: len(app.bus.listeners(name)) for name in (ev.AGENT_STREAM_CHUNK.name, ev.AGENT_TURN_END.name)}
        stream = AgentStream(app.ctx, lambda method, params: sent.append((method, params)), forced=False)
        assert stream.capabilities({}) == {}
        assert stream.capabilities({"_meta": {"dsh.dev/agentEvents": "yes"}}) == {}  # only true turns it on
        assert {name: len(app.bus.listeners(name)) for name in before} == before
        await run_turn(app)
        assert sent == []
        assert stream.capabilities({"_meta": {"dsh.dev/agentEvents": True}}) == {"dsh.dev/agentEvents": True}
        await run_turn(app)
    names = [method for method, _ in sent]
    assert names[0] == "_dsh/agent/created"
    assert (
        names.index("_dsh/agent/turn-start") < names.index("_dsh/agent/turn-end") < names.index("_dsh/agent/disposed")
    )
    assert all(params["sessionId"] == "s1" and params["agentId"] == "a1" for _, params in sent)


async def test_a_failing_sender_never_breaks_the_turn() -> None:
    def broken(method: str, params: dict[str, Any]) -> None:
        raise ValueError("Out of range float values are not JSON compliant")

    ends: list[Any] = []
    async with App() as app:
        load_core(app.ctx)
        app.ctx.on(ev.AGENT_TURN_END, lambda agent, turn, reason: ends.append(reason))
        AgentStream(app.ctx, broken, forced=True)
        await run_turn(app)
    assert ends == [{"kind": "completed"}]
