"""The ``agent_loop`` plugin: the service that creates ``ReactLoopAgent``s, and the agent factory behind
``ctx.agents.create`` / ``ctx.agents.resume``.

It injects exactly the five interface services. ``session_persistence`` is *not* injected: ``resume`` reads it
when called and fails with a clear error without one.

Lifecycle of every agent (one scope, disposed LIFO): enter the session → announce it → register the agent →
run the loop. Teardown is therefore: stop the loop and await its exit (the closing ``turn/end`` is appended and
flushed while the session is still attached) → unregister (``agent/disposed``) → detach the session.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from dsh._log import get_logger
from dsh.kernel import Scope, current_scope, plugin
from dsh.loop._agent import ReactLoopAgent
from dsh.services.agents import AgentHandle, AgentOptions

if TYPE_CHECKING:
    from dsh.kernel import Context
    from dsh.services.sessions import Session, SessionPersistence

__all__ = ["AgentLoop", "AgentLoopConfig", "ConfiguredAgent", "agent_loop_plugin"]

log = get_logger("dsh.loop")


class ConfiguredAgent(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    id: str = Field(min_length=1)
    model: str | None = None
    system_prompt: str | None = None
    resume_session_id: str | None = None


class AgentLoopConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)
    agents: list[ConfiguredAgent] = Field(default_factory=list)


class AgentLoop:
    """``ctx.agent_loop``: create loop agents; also the ``ctx.agents`` factory (``create_agent``,
    ``resume_agent``)."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    def create(self, id: str, options: AgentOptions | None = None) -> ReactLoopAgent:
        """An agent on a fresh session ``f"{id}-session-{uuid4()}"``, owned by the calling scope.

        A taken agent id is rejected before the session store is touched.
        """
        self._check_free(id)
        session = self._ctx.sessions.prepare(f"{id}-session-{uuid.uuid4()}")
        scope = (current_scope() or self._ctx.scope).child(f"agent:{id}")
        return self._start(scope, id, session, options)

    # -- the AgentFactory seam (used through ctx.agents) ------------------------------------------------

    async def create_agent(
        self,
        *,
        agent_id: str,
        session_id: str,
        meta: dict[str, Any] | None = None,
        agent_options: AgentOptions | None = None,
    ) -> AgentHandle:
        self._check_free(agent_id)
        session = self._ctx.sessions.prepare(session_id, meta=meta or {})
        return await self._handle(agent_id, session, agent_options)

    async def resume_agent(
        self, *, agent_id: str, resume_session_id: str, agent_options: AgentOptions | None = None
    ) -> AgentHandle:
        persistence: SessionPersistence | None = self._ctx.get("session_persistence")
        if persistence is None:
            raise RuntimeError(
                "cannot resume: session persistence is not configured (load a session persistence backend)"
            )
        self._check_free(agent_id)
        loaded = await persistence.load(resume_session_id)
        try:
            self._check_free(agent_id)  # the await may have let another caller take the id
            header = loaded.header
            meta: dict[str, Any] = {"created_at": header.created_at}
            if header.cwd is not None:
                meta["cwd"] = header.cwd
            if header.parent_session is not None:
                meta["parent_session"] = header.parent_session
            if header.parent_call is not None:
                meta["parent_call"] = header.parent_call
            session = self._ctx.sessions.prepare(
                resume_session_id, seed=loaded.events, meta=meta, seed_owned=loaded.owned
            )
            return await self._handle(agent_id, session, agent_options)
        except BaseException:
            release = getattr(persistence, "release", None)
            if release is not None:
                release(resume_session_id)
            raise

    # -- internals --------------------------------------------------------------------------------------

    def _check_free(self, agent_id: str) -> None:
        if self._ctx.agents.get(agent_id) is not None:
            raise ValueError(f"agent {agent_id!r} already exists")

    async def _handle(self, agent_id: str, session: Session, options: AgentOptions | None) -> AgentHandle:
        scope = (current_scope() or self._ctx.scope).child(f"agent:{agent_id}")
        try:
            agent = self._start(scope, agent_id, session, options, close_on_error=False)
        except BaseException:
            await scope.close()
            raise
        return AgentHandle(agent, scope.close)

    def _start(
        self,
        scope: Scope,
        agent_id: str,
        session: Session,
        options: AgentOptions | None,
        *,
        close_on_error: bool = True,
    ) -> ReactLoopAgent:
        ctx = self._ctx
        agent = ReactLoopAgent(ctx, agent_id, session, options)
        try:
            with scope.active():
                ctx.sessions.enter(session)
                ctx.sessions.announce(session)
                ctx.agents.register(agent)
                agent.start(scope)
        except BaseException:
            if close_on_error:
                scope.spawn(scope.close)
            raise
        return agent


def _options(spec: ConfiguredAgent) -> AgentOptions:
    return AgentOptions(model=spec.model, system_prompt=spec.system_prompt)


@plugin("agent_loop", inject=("agents", "sessions", "llm", "tools", "system_prompt"), config=AgentLoopConfig)
def agent_loop_plugin(ctx: Context, config: AgentLoopConfig) -> None:
    loop = AgentLoop(ctx)
    ctx.provide("agent_loop", loop)
    ctx.agents.set_factory(loop)
    for spec in config.agents:
        if spec.resume_session_id:
            ctx.plugin(_config_resume, spec)
        else:
            try:  # like a configured resume: a failure (storage unavailable) is a warning, never a crash
                loop.create(spec.id, _options(spec))
            except Exception as error:
                log.warning("configured agent could not be created", agent_id=spec.id, error=str(error))


@plugin("agent_loop.config_resume", inject=("session_persistence",))
def _config_resume(ctx: Context, spec: ConfiguredAgent) -> None:
    """Resume a configured agent once persistence exists; a failure is a warning, never a crash."""

    async def resume() -> None:
        loop: AgentLoop = ctx.agent_loop
        assert spec.resume_session_id is not None
        try:  # the agent's scope is a child of this plugin's scope, so it is disposed with it
            await loop.resume_agent(
                agent_id=spec.id, resume_session_id=spec.resume_session_id, agent_options=_options(spec)
            )
        except Exception as error:
            log.warning("configured agent could not be resumed", agent_id=spec.id, error=str(error))

    ctx.spawn(resume, name=f"config-resume:{spec.id}")
