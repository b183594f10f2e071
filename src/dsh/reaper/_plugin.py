"""The ``reaper`` plugin: tag every tool call's processes with its session; end them with the session's agent;
end every descendant when the application is disposed in a daemon that is their subreaper. It provides the
``reaper`` service: its :class:`~dsh.reaper.SessionTags` (the tags this application handed out), cleared with
the plugin's scope."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dsh import events as ev
from dsh._log import get_logger
from dsh.kernel import plugin
from dsh.reaper._proc import SessionTags, end_descendants, is_subreaper

if TYPE_CHECKING:
    from dsh.kernel import Context, Next
    from dsh.services.agents import Agent
    from dsh.services.tools import ToolExecution, ToolResult

__all__ = ["reaper_plugin"]

log = get_logger("dsh.reaper")


@plugin("reaper", inject=("tools",))
def reaper_plugin(ctx: Context, config: object = None) -> None:
    tags = SessionTags()
    ctx.effect(tags.clear)

    async def tagging(execution: ToolExecution, next_: Next[ToolExecution, ToolResult]) -> ToolResult:
        agent = execution.agent
        if agent is None:
            return await next_()
        with tags.tagged(agent.session.id):
            return await next_()

    def disposed(agent: Agent) -> None:
        try:
            ctx.spawn(_end_session, agent.session.id, name=f"reaper:{agent.session.id}")
        except Exception:  # the application is being disposed: do it now
            tags.end(agent.session.id)

    async def _end_session(session_id: str) -> None:
        import anyio

        ended = await anyio.to_thread.run_sync(tags.end, session_id)
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
    ctx.provide("reaper", tags)  # last: providing applies plugins waiting for it, before this set-up's end
