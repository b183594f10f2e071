"""The ``agents`` interface service: the :class:`Agent` interface, the registry and the factory seam.

Front ends (ACP, a chat UI, tests) program against this module only, never against a loop implementation: they
create and resume agents through ``ctx.agents`` and observe them through session events and ``agent/*`` events.

Guarantees:

* Agent ids are unique. ``register`` emits ``agent/created``; if a listener raises, the entry is rolled back and
  the error propagates. Unregistering emits ``agent/disposed`` (a listener's exception is logged).
* At most one factory at a time; ``create``/``resume`` fail with a clear error while none is registered.
* :class:`AgentHandle.dispose` is memoized: every caller awaits the same teardown.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

import anyio

from dsh import events as ev
from dsh._log import get_logger
from dsh.kernel import CancelToken, Disposer, current_scope, plugin
from dsh.services.llm import ContentBlock, MessageSource

if TYPE_CHECKING:
    from dsh.kernel import Context
    from dsh.services.sessions import Session

__all__ = [
    "Agent",
    "AgentFactory",
    "AgentHandle",
    "AgentOptions",
    "AgentRegistry",
    "AgentStatus",
    "CompactRequest",
    "NoAgentFactoryError",
    "agents_plugin",
]

AgentStatus = Literal["idle", "running", "disposed"]
log = get_logger("dsh.agents")


@dataclass(frozen=True, slots=True)
class AgentOptions:
    """``model`` (``provider:model``) and an extra ``system_prompt`` appended after the assembled sections."""

    model: str | None = None
    system_prompt: str | None = None


@dataclass(frozen=True, slots=True)
class CompactRequest:
    """What ``agent/compact`` listeners get: the user's focus (``/compact <instructions>``) and the cancel token
    of the compaction (``agent.cancel()`` aborts it)."""

    instructions: str | None
    signal: CancelToken


class Agent(Protocol):
    """What every agent offers. Everything observable happens through its session and ``agent/*`` events."""

    @property
    def id(self) -> str: ...
    @property
    def session(self) -> Session: ...
    @property
    def status(self) -> AgentStatus: ...
    @property
    def options(self) -> AgentOptions: ...

    def send(self, content: list[ContentBlock], source: MessageSource | None = None) -> None: ...
    def steer(self, content: list[ContentBlock], source: MessageSource | None = None) -> None: ...
    def inject(self, content: list[ContentBlock], source: MessageSource | None = None) -> None: ...
    def abort(self, reason: str = "aborted") -> None: ...
    def cancel(self, reason: str = "cancelled") -> None: ...
    async def when_idle(self) -> None: ...
    async def compact(self, instructions: str | None = None) -> dict[str, Any] | None:
        """Compact the conversation now, between turns (``agent/compact``): the compaction's data, or None
        when there was nothing to compact (or no compaction plugin). Raises ``AbortedError`` when cancelled and
        the plugin's error when summarising failed; either way the history is unchanged."""
        ...


class AgentHandle:
    """An agent plus the capability to dispose it; :meth:`dispose` is memoized."""

    __slots__ = ("_dispose", "_done", "_started", "agent")

    def __init__(self, agent: Agent, dispose: Callable[[], Awaitable[None]]) -> None:
        self.agent = agent
        self._dispose = dispose
        self._done = anyio.Event()
        self._started = False

    async def dispose(self) -> None:
        if self._started:
            await self._done.wait()
            return
        self._started = True
        try:
            await self._dispose()
        finally:
            self._done.set()


class AgentFactory(Protocol):
    """What the registry delegates ``create``/``resume`` to (an agent loop implements it)."""

    async def create_agent(
        self,
        *,
        agent_id: str,
        session_id: str,
        meta: dict[str, Any] | None = None,
        agent_options: AgentOptions | None = None,
    ) -> AgentHandle: ...

    async def resume_agent(
        self, *, agent_id: str, resume_session_id: str, agent_options: AgentOptions | None = None
    ) -> AgentHandle: ...


class NoAgentFactoryError(RuntimeError):
    def __init__(self) -> None:
        super().__init__("no agent factory registered (load an agent loop plugin)")


class AgentRegistry:
    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._agents: dict[str, Agent] = {}
        self._factory: AgentFactory | None = None

    # -- factory seam -----------------------------------------------------------------------------------

    def set_factory(self, factory: AgentFactory) -> Disposer:
        if self._factory is not None:
            raise RuntimeError("an agent factory is already registered")
        self._factory = factory

        def clear() -> None:
            if self._factory is factory:
                self._factory = None

        return (current_scope() or self._ctx.scope).effect(clear)

    async def create(
        self,
        *,
        agent_id: str,
        session_id: str,
        meta: dict[str, Any] | None = None,
        agent_options: AgentOptions | None = None,
    ) -> AgentHandle:
        """Create an agent on a new session with the caller's id (``meta``: ``cwd``, ``parent_session``)."""
        if self._factory is None:
            raise NoAgentFactoryError()
        return await self._factory.create_agent(
            agent_id=agent_id, session_id=session_id, meta=meta, agent_options=agent_options
        )

    async def resume(
        self, *, agent_id: str, resume_session_id: str, agent_options: AgentOptions | None = None
    ) -> AgentHandle:
        """Load a persisted session and run a fresh agent on it."""
        if self._factory is None:
            raise NoAgentFactoryError()
        return await self._factory.resume_agent(
            agent_id=agent_id, resume_session_id=resume_session_id, agent_options=agent_options
        )

    # -- registry ---------------------------------------------------------------------------------------

    def register(self, agent: Agent) -> Disposer:
        if agent.id in self._agents:
            raise ValueError(f"agent {agent.id!r} already exists")
        self._agents[agent.id] = agent
        try:
            self._ctx.emit(ev.AGENT_CREATED, agent)
        except BaseException:
            del self._agents[agent.id]
            raise

        def unregister() -> None:
            if self._agents.get(agent.id) is agent:
                del self._agents[agent.id]
                try:
                    self._ctx.emit(ev.AGENT_DISPOSED, agent)
                except Exception:
                    log.exception("agent/disposed listener failed", agent_id=agent.id)

        return (current_scope() or self._ctx.scope).effect(unregister)

    def get(self, agent_id: str) -> Agent | None:
        return self._agents.get(agent_id)

    def list(self) -> list[Agent]:
        return list(self._agents.values())


@plugin("agents")
def agents_plugin(ctx: Context, config: object) -> None:
    ctx.provide("agents", AgentRegistry(ctx))
