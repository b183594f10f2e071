"""The ``reaper`` plugin: tag every tool call's processes with its session; end them with the session's agent;
end every descendant when the application is disposed in a daemon that is their subreaper."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh import events as ev
from dsh._log import get_logger
from dsh.kernel import plugin
from dsh.reaper._proc import end_descendants, end_tagged, is_subreaper, tagged

if TYPE_CHECKING:
    from dsh.kernel import Context, Next
    from dsh.services.agents import Agent
    from dsh.services.tools import ToolExecution, ToolResult

__all__ = ["reaper_plugin"]

log = get_logger("dsh.reaper")


@plugin("reaper", inject=("tools",))
def reaper_plugin(ctx: Context, config: object = None) -> None:
    async def tagging(execution: ToolExecution, next_: Next[ToolExecution, ToolResult]) -> ToolResult:
        agent = execution.agent
        if agent is None:
            return await next_()
        with tagged(agent.session.id):
            return await next_()

    def disposed(agent: Agent) -> None:
        try:
            ctx.spawn(_end_session, agent.session.id, name=f"reaper:{agent.session.id}")
        except Exception:  # the application is being disposed: do it now
            end_tagged(agent.session.id)

    async def _end_session(session_id: str) -> None:
        import anyio

        ended = await anyio.to_thread.run_sync(end_tagged, session_id)
        if ended:
            log.info("ended a closed session's leftover processes", session_id=session_id, pids=ended)

    def at_exit() -> None:
        if is_subreaper():
            ended = end_descendants()
            if ended:
                log.info("ended leftover processes at exit", pids=ended)

    ctx.tools.stage("contain", tagging)
    ctx.on(ev.AGENT_DISPOSED, disposed)
    ctx.effect(at_exit)
