"""A step's consecutive concurrency-safe tool calls run at the same time; any other call runs alone; results are
logged in the model's call order; a cancel stops the whole batch and the turn closes balanced."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel

from dsh.kernel import Context
from dsh.loop._agent import ReactLoopAgent
from dsh.services.agents import AgentOptions
from dsh.services.tools import ToolDefinition, ToolExecution

OBJECT = {"type": "object", "properties": {"n": {"type": "integer"}}, "additionalProperties": False}


class Probe:
    """Tools that record how many of them run at once."""

    def __init__(self) -> None:
        self.running = 0
        self.most = 0
        self.order: list[str] = []
        self.started = anyio.Event()

    def tool(self, name: str, *, safe: bool, hold: bool = False) -> ToolDefinition:
        async def run(arguments: Any, execution: ToolExecution) -> str:
            self.running += 1
            self.most = max(self.most, self.running)
            self.order.append(f"start {execution.call_id}")
            self.started.set()
            try:
                if hold:  # until the call's token aborts, as a well-behaved tool does
                    assert execution.signal is not None
                    await execution.signal.wait()
                    return "stopped"
                else:
                    await anyio.lowlevel.checkpoint()  # let the others of a batch start
                    await anyio.lowlevel.checkpoint()
                return f"done {execution.call_id}"
            finally:
                self.running -= 1
                self.order.append(f"end {execution.call_id}")

        return ToolDefinition(name, name, OBJECT, run, meta={"kind": "read", "concurrency_safe": safe})


def _calls(*names: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": {}, "id": f"c{index}"} for index, name in enumerate(names)]}


def _agent(core: Context, steps: list[dict[str, Any]]) -> ReactLoopAgent:
    core.scripted_models.add("p", steps)
    agent: ReactLoopAgent = core.agent_loop.create("p", AgentOptions(model="scripted:p"))
    return agent


async def test_safe_calls_run_together_and_results_keep_the_call_order(core: Context) -> None:
    probe = Probe()
    core.tools.register(probe.tool("look", safe=True))
    core.tools.register(probe.tool("change", safe=False))
    agent = _agent(core, [_calls("look", "look", "look", "change", "look", "look"), {"text": "ok"}])
    agent.send([{"type": "text", "text": "go"}])
    with anyio.fail_after(10):
        await agent.when_idle()
    events = [e for e in agent.session.events if e.type in ("tool/call", "tool/result")]
    assert [(e.type, e.data["call_id"]) for e in events] == [
        ("tool/call", "c0"),
        ("tool/call", "c1"),
        ("tool/call", "c2"),
        ("tool/result", "c0"),
        ("tool/result", "c1"),
        ("tool/result", "c2"),
        ("tool/call", "c3"),
        ("tool/result", "c3"),
        ("tool/call", "c4"),
        ("tool/call", "c5"),
        ("tool/result", "c4"),
        ("tool/result", "c5"),
    ]
    assert [e.data["content"][0]["text"] for e in events if e.type == "tool/result"] == [
        f"done c{index}" for index in range(6)
    ]
    assert probe.most == 3
    # the unsafe call ran alone: nothing started between its start and its end
    start, end = probe.order.index("start c3"), probe.order.index("end c3")
    assert end == start + 1


async def test_a_cancel_stops_the_whole_batch_and_the_turn_closes(core: Context) -> None:
    probe = Probe()
    core.tools.register(probe.tool("wait", safe=True, hold=True))
    agent = _agent(core, [_calls("wait", "wait", "wait"), {"text": "never"}])
    agent.send([{"type": "text", "text": "go"}])
    with anyio.fail_after(10):
        await probe.started.wait()
        while probe.running < 3:
            await anyio.lowlevel.checkpoint()
        agent.cancel()
        await agent.when_idle()
    assert probe.running == 0
    types = [e.type for e in agent.session.events]
    assert types.count("tool/call") == 3
    assert types[-2:] == ["step/end", "turn/end"]
    assert agent.session.events[-1].data["reason"]["kind"] == "aborted"
