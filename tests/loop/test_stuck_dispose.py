"""Disposal while a tool ignores its cancel token (issue #10, item 5c; RFC 0002): after the stop grace the loop's
turn is closed ``disposed`` (an error ``tool/result`` for the stuck call, ``step/end``, ``turn/end``, flushed)
before the loop's task is cancelled, and nothing is appended after that ``turn/end``."""

from __future__ import annotations

from typing import Any

import anyio
from pydantic import BaseModel

from dsh import events as ev
from dsh.kernel import Context
from dsh.loop._agent import ReactLoopAgent
from dsh.services.agents import AgentHandle, AgentOptions
from dsh.services.sessions import Session
from dsh.services.tools import ToolExecution, define_tool


class NoArgs(BaseModel):
    pass


async def test_a_tool_ignoring_its_cancel_token_is_closed_disposed_at_dispose(core: Context) -> None:
    started = anyio.Event()

    async def stubborn(args: NoArgs, execution: ToolExecution) -> str:
        started.set()
        await anyio.sleep(30)  # never looks at execution.signal
        return "late"

    core.tools.register(define_tool("stubborn", "ignores cancellation", NoArgs, stubborn))
    flushed: list[dict[str, Any]] = []

    async def on_flush(session: Session) -> None:
        flushed.append(session.events[-1].data)

    core.on(ev.SESSION_FLUSH, on_flush)
    core.scripted_models.add("a", [{"tool_calls": [{"name": "stubborn", "arguments": {}, "id": "t1"}]}])
    handle: AgentHandle = await core.agents.create(
        agent_id="a", session_id="a-sid", meta={"cwd": "/tmp"}, agent_options=AgentOptions(model="scripted:a")
    )
    agent = handle.agent
    assert isinstance(agent, ReactLoopAgent)
    agent.send([{"type": "text", "text": "go"}])
    with anyio.fail_after(10):
        await started.wait()
        await handle.dispose()
    events = agent.session.events
    assert [e.type for e in events][-4:] == ["tool/call", "tool/result", "step/end", "turn/end"]
    result = events[-3].data
    assert result["call_id"] == "t1" and result["is_error"] is True
    assert result["error"] == {"name": "AgentDisposedError", "code": "disposed"}
    assert events[-1].data == {"turn": 1, "reason": {"kind": "disposed"}}
    assert flushed == [{"turn": 1, "reason": {"kind": "disposed"}}], "the closed turn is handed to storage"
