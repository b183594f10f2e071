"""The tools service's session-scoped registrations: only the session's agent finds, runs and is offered them."""

from __future__ import annotations

from typing import Any

from dsh import events as ev
from dsh.app import load_core
from dsh.kernel import App
from dsh.services.agents import AgentOptions
from dsh.services.llm import GenerateRequest
from dsh.services.tools import ToolDefinition, ToolExecution


async def test_a_session_tool_is_seen_run_and_offered_only_in_its_session(tmp_path: Any) -> None:
    async with App() as app:
        ctx = app.ctx
        load_core(ctx, data_dir=str(tmp_path))
        one = await ctx.agents.create(agent_id="one", session_id="s-one", agent_options=AgentOptions(model="echo"))
        two = await ctx.agents.create(agent_id="two", session_id="s-two", agent_options=AgentOptions(model="echo"))

        async def run(arguments: Any, execution: ToolExecution) -> str:
            return "ran"

        tool = ToolDefinition("mine", "a session tool", {"type": "object"}, run)
        remove = ctx.tools.register(tool, session=one.agent.session.id)
        assert ctx.tools.get("mine") is None
        assert ctx.tools.get("mine", one.agent.session.id) is tool
        assert ctx.tools.get("mine", two.agent.session.id) is None
        assert "mine" not in [s["name"] for s in ctx.tools.schemas()]

        ran = await ctx.tools.execute(ToolExecution("c1", "mine", {}, one.agent))
        assert ran.content == [{"type": "text", "text": "ran"}] and not ran.is_error
        refused = await ctx.tools.execute(ToolExecution("c2", "mine", {}, two.agent))
        assert refused.is_error

        async def keep(*args: Any) -> Any:
            return args[-1]

        request = GenerateRequest(model="echo", messages=[], tools=[])
        offered = await ctx.waterfall(ev.AGENT_REQUEST, one.agent, 1, 1, request, default=keep)
        assert [t["name"] for t in offered.tools or []] == ["mine"]
        other = await ctx.waterfall(ev.AGENT_REQUEST, two.agent, 1, 1, request, default=keep)
        assert other.tools == []

        await remove()
        assert ctx.tools.get("mine", one.agent.session.id) is None
        await one.dispose()
        await two.dispose()
