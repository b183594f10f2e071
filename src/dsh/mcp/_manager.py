"""The MCP plugin: per-session servers whose tools become session-scoped dsh tools.

Seams used (nothing else): the ``tools`` registry's session-scoped registrations, ``agent/request`` (the first
model call of a turn waits for servers still connecting, each bounded by its own timeout, then reports the
servers that failed), ``tools/execute`` (runs this session's MCP tools, keeping ``isError`` and naming the card)
and ``agent/disposed`` (a safety net: the session's servers close with its agent). Front ends call
:meth:`McpManager.open` and :meth:`McpManager.close`.

Guarantees: :meth:`McpManager.open` returns at once (no I/O, no SDK import); a server's failure never touches
the session or another server, and is reported to the front end once per server; :meth:`close` ends every
server of the session (stdio process groups ended, HTTP sessions closed), and the plugin's disposal kills any
stdio group still alive.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio

from dsh import events as ev
from dsh._log import get_logger
from dsh.kernel import plugin
from dsh.mcp._config import (
    DEFAULT_TIMEOUT,
    McpServerConfig,
    merge_servers,
    specs_from_acp,
    specs_from_config,
)
from dsh.mcp._names import unique_names
from dsh.reaper import SessionTags
from dsh.services.tools import ToolCard, ToolDefinition, ToolExecution, ToolResult, error_result

if TYPE_CHECKING:
    from dsh.kernel import Context, Disposer, Next
    from dsh.mcp._server import ServerConnection
    from dsh.services.agents import Agent
    from dsh.services.llm import GenerateRequest

__all__ = ["McpManager", "McpOptions", "Reporter", "mcp_plugin", "tool_kind"]

log = get_logger("dsh.mcp")


def _tag(session_id: str) -> str:
    """The process tag of a session's MCP servers: not the session's own (``dsh.reaper`` ends that one when the
    agent is disposed, before the servers are closed gracefully)."""
    return f"{session_id}:mcp"


Reporter = Callable[[str, str], None]
"""``report(server name, message)``: tell the user once that a server is not available."""


@dataclass(frozen=True)
class McpOptions:
    servers: Mapping[str, McpServerConfig] = field(default_factory=dict)
    """The configuration file's ``mcp_servers`` (for every session)."""
    timeout: float = DEFAULT_TIMEOUT
    """Seconds a server gets to start when it does not say (the ``mcp_timeout`` setting, ``DSH_MCP_TIMEOUT``)."""


_REMOVES = frozenset({"delete", "remove", "rm", "unlink", "rmdir", "erase", "purge", "destroy", "drop", "trash"})
_MOVES = frozenset({"move", "rename", "mv"})


def _words(name: str) -> set[str]:
    """The lower-case words of a tool name: ``write_file``, ``deleteIssue``, ``git-rm`` → their parts."""
    import re

    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return {word for word in re.split(r"[^a-z0-9]+", spaced.lower()) if word}


def tool_kind(annotations: Any, name: str = "") -> str:
    """The ACP kind of an MCP tool's card, from its annotations and its name.

    ``destructiveHint`` says a tool *may* change or overwrite what exists (the filesystem server's ``write_file``
    and ``edit_file`` carry it), not that it removes anything, so it never makes ``delete`` on its own: only a
    tool whose name says it removes (``delete_file``, ``removeLabel``, ``rm``) is ``delete``; a move or rename is
    ``move``; any other tool that is not read-only by its annotations (``readOnlyHint: false`` or
    ``destructiveHint: true``) is ``edit``; read-only is ``read``; a tool that says nothing is ``other``."""
    read_only = getattr(annotations, "readOnlyHint", None) if annotations is not None else None
    if read_only is True:
        return "read"
    words = _words(name)
    writes = read_only is False or getattr(annotations, "destructiveHint", None) is True
    if words & _REMOVES:
        return "delete"
    if words & _MOVES:
        return "move"
    return "edit" if writes else "other"


@dataclass
class _Tool:
    connection: ServerConnection
    tool: str
    card: ToolCard


@dataclass(eq=False)
class _Session:
    id: str
    connections: dict[str, ServerConnection] = field(default_factory=dict)
    tools: dict[str, _Tool] = field(default_factory=dict)
    registrations: dict[str, list[Disposer]] = field(default_factory=dict)
    reported: set[str] = field(default_factory=set)
    notes: list[tuple[str, str]] = field(default_factory=list)
    """``(server, message)`` to show the user at the next turn (a tool listed twice)."""
    notes_sent: set[str] = field(default_factory=set)
    report: Reporter | None = None
    images: bool = False
    closing: bool = False
    hurry: bool = False
    closed: anyio.Event = field(default_factory=anyio.Event)


class McpManager:
    def __init__(self, ctx: Context, options: McpOptions) -> None:
        self._ctx = ctx
        self._options = options
        self._sessions: dict[str, _Session] = {}
        self._closing: dict[str, _Session] = {}
        self._used = False
        self._configured = specs_from_config(options.servers, options.timeout)
        self._tags = SessionTags()
        """The tags of this manager's servers' processes (ended with their session)."""

    @property
    def transports(self) -> dict[str, bool]:
        """What ``mcpCapabilities`` may advertise (stdio is always supported)."""
        return {"http": True, "sse": True}

    # -- sessions -------------------------------------------------------------------------------------------

    def open(self, session_id: str, servers: Iterable[Any], *, cwd: str | None, report: Reporter | None) -> int:
        """Start connecting the configuration file's servers and the ACP *servers* for *session_id* in the
        background; return how many. Returns at once. A session opened again replaces its servers."""
        specs = merge_servers(self._configured, specs_from_acp(servers, self._options.timeout))
        if not specs:
            return 0
        from dsh.mcp._server import ServerConnection

        state = _Session(session_id, report=report)
        old = self._sessions.get(session_id)
        if old is not None:
            self._ctx.spawn(self._close_session, old, name=f"mcp-close:{session_id}")
        self._sessions[session_id] = state
        self._used = True
        for spec in specs:
            connection = ServerConnection(spec, cwd=cwd, on_tools=partial(self._register, state))
            state.connections[spec.name] = connection
            self._spawn(connection)
        log.info("mcp servers starting", session_id=session_id, servers=[s.name for s in specs])
        return len(specs)

    def _spawn(self, connection: ServerConnection) -> None:
        """Run the connection in the background; its server process (and what that starts) carries the
        session's MCP tag, so the session's close finds whatever escaped the server's process group, and its
        environment and logged output follow this application's secret policy (the task inherits both)."""
        from dsh.secrets import policy_in_force

        session_id = next((s.id for s in self._sessions.values() if connection in s.connections.values()), None)
        with (
            policy_in_force(self._ctx.get("secret_policy")),
            self._tags.tagged(_tag(session_id)) if session_id is not None else contextlib.nullcontext(),
        ):
            self._ctx.spawn(connection.run, name=f"mcp:{connection.name}")

    def servers(self, session_id: str) -> dict[str, str]:
        """``{name: state}`` of the session's servers (for tests and status displays)."""
        state = self._sessions.get(session_id)
        return {name: c.state for name, c in state.connections.items()} if state is not None else {}

    async def close(self, session_id: str, *, hurry: bool = False) -> None:
        """Close the session's servers and wait until they are gone (also when another close is under way);
        *hurry* when the daemon is exiting (see :meth:`ServerConnection.close`)."""
        state = self._sessions.pop(session_id, None) or self._closing.get(session_id)
        if state is not None:
            state.hurry = state.hurry or hurry
            await self._close_session(state)

    def agent_disposed(self, agent: Agent) -> None:
        """Safety net: a session whose agent is disposed without a front end's close loses its servers."""
        state = self._sessions.get(agent.session.id)
        if state is not None:
            self._ctx.spawn(self._close_if_current, state, name=f"mcp-close:{state.id}")

    async def _close_if_current(self, state: _Session) -> None:
        if self._sessions.get(state.id) is state:
            del self._sessions[state.id]
            await self._close_session(state)

    async def _close_session(self, state: _Session) -> None:
        if state.closing:
            await state.closed.wait()
            return
        state.closing = True
        self._closing[state.id] = state
        try:
            for name in list(state.registrations):
                await self._unregister(state, name)
            with anyio.CancelScope(shield=True):
                async with anyio.create_task_group() as group:
                    for connection in state.connections.values():
                        group.start_soon(partial(connection.close, hurry=state.hurry))
                # what the servers started and left behind (a setsid grandchild): gone with the session. Not when
                # the daemon exits (hurry): its exit ends every descendant in one sweep, and a /proc scan per
                # session made an EOF with 100 sessions take seconds (issue 42).
                if not state.hurry:
                    ended = await anyio.to_thread.run_sync(self._tags.end, _tag(state.id))
                    if ended:
                        log.info("ended processes the mcp servers left", session_id=state.id, pids=ended)
            log.info("mcp servers closed", session_id=state.id)
        finally:
            state.closed.set()
            if self._closing.get(state.id) is state:
                del self._closing[state.id]

    def at_exit(self) -> None:
        """The plugin's disposal (daemon exit): end every stdio server's process group still alive (last resort),
        and spare the exit the final garbage collection of the SDK's objects (measured: 0.05 s → 0.8 s of
        interpreter shutdown on a loaded machine once the SDK is imported; ``gc.freeze`` skips it)."""
        import gc
        import sys

        from dsh.mcp._stdio import kill_group

        if self._used and "mcp" in sys.modules:
            gc.freeze()

        for state in [*self._sessions.values(), *self._closing.values()]:
            for connection in state.connections.values():
                if connection.pid is not None and connection.state not in ("closed", "failed"):
                    kill_group(connection.pid)

    # -- tools ----------------------------------------------------------------------------------------------

    async def _unregister(self, state: _Session, server: str) -> None:
        for dispose in state.registrations.pop(server, []):
            await dispose()
        for name in [n for n, t in state.tools.items() if t.connection.name == server]:
            del state.tools[name]

    async def _register(self, state: _Session, connection: ServerConnection) -> None:
        """Register the server's tools for the session. A name listed twice keeps its first entry (the other is
        skipped, logged and shown to the user at the next turn); a registration that fails skips that tool only;
        every registration made is disposed with the server's (or the session's) tools, whatever failed."""
        if self._sessions.get(state.id) is not state:
            return  # closed meanwhile
        await self._unregister(state, connection.name)
        registry = self._ctx.tools
        tools: list[Any] = []
        seen: set[str] = set()
        for tool in connection.tools:
            if tool.name in seen:
                note = f"MCP server `{connection.name}` listed the tool `{tool.name}` twice; the second was skipped"
                log.warning("mcp server listed a tool twice", server=connection.name, tool=tool.name)
                if note not in state.notes_sent:
                    state.notes.append((connection.name, note))
                continue
            seen.add(tool.name)
            tools.append(tool)
        names = unique_names(connection.name, [t.name for t in tools], taken=state.tools)
        disposers: list[Disposer] = []
        state.registrations[connection.name] = disposers  # before the first registration: none is ever lost
        for tool in tools:
            name = names[tool.name]
            kind = tool_kind(tool.annotations, tool.name)
            card = ToolCard(f"{connection.name}: {tool.name}", kind)
            try:
                definition = ToolDefinition(
                    name=name,
                    description=tool.description
                    or getattr(tool, "title", None)
                    or f"{tool.name} (MCP server {connection.name})",
                    parameters=dict(tool.inputSchema or {"type": "object"}),
                    execute=self._unreachable,
                    meta={
                        "kind": kind,
                        "asks": kind != "read",
                        "present": lambda _args, _cwd, c=card: c,
                        "mcp": True,
                    },
                )
                disposers.append(registry.register(definition, session=state.id))
            except Exception as exc:
                log.warning("mcp tool not registered", server=connection.name, tool=tool.name, error=str(exc)[:300])
                continue
            state.tools[name] = _Tool(connection, tool.name, card)

    async def _unreachable(self, arguments: Any, execution: ToolExecution) -> str:
        raise RuntimeError(f"{execution.name} is an MCP tool of another session")

    # -- seams ----------------------------------------------------------------------------------------------

    async def on_request(
        self,
        agent: Agent,
        turn: int,
        step: int,
        request: GenerateRequest,
        next_: Next[GenerateRequest, GenerateRequest],
    ) -> GenerateRequest:
        """``agent/request``: wait for the session's servers still connecting (each bounded by its timeout;
        a cancel stops the wait), report the ones that failed, once each."""
        state = self._sessions.get(agent.session.id)
        if state is None:
            return await next_(request)
        state.images = self._ctx.llm.takes_images(request.model)
        pending = [c for c in state.connections.values() if not c.settled.is_set()]
        changing = [c for c in state.connections.values() if c.settled.is_set() and c.state == "ready"]
        with anyio.CancelScope() as scope:
            signal = request.signal
            remove = signal.add_callback(lambda _r: scope.cancel()) if signal is not None else None
            try:
                async with anyio.create_task_group() as group:
                    for connection in pending:
                        group.start_soon(connection.settled.wait)
                    for connection in changing:  # a list_changed that arrived with the last result counts now
                        group.start_soon(self._bounded, connection.tools_current, connection.spec.timeout)
            finally:
                if remove is not None:
                    remove()
        notes, state.notes = state.notes, []
        for server, note in notes:
            if note not in state.notes_sent:
                state.notes_sent.add(note)
                if state.report is not None:
                    state.report(server, note)
        for connection in state.connections.values():
            if connection.state == "failed" and connection.name not in state.reported:
                state.reported.add(connection.name)
                if state.report is not None:
                    state.report(connection.name, f"MCP server `{connection.name}` did not start: {connection.failure}")
        return await next_(request)

    @staticmethod
    async def _bounded(wait: Callable[[], Awaitable[None]], seconds: float) -> None:
        with anyio.move_on_after(seconds):
            await wait()

    async def on_execute(self, execution: ToolExecution, next_: Next[ToolExecution, ToolResult]) -> ToolResult:
        """``tools/execute``: run this session's MCP tools (the permission gate, prepended, already decided)."""
        agent = execution.agent
        state = self._sessions.get(agent.session.id) if agent is not None else None
        entry = state.tools.get(execution.name) if state is not None else None
        if state is None or entry is None:
            return await next_()
        display = {"card": {"title": entry.card.title, "kind": entry.card.kind}}
        arguments = execution.arguments
        if not isinstance(arguments, dict):
            return replace(
                error_result(execution.call_id, ValueError("the arguments must be a JSON object")), display=display
            )
        from dsh.mcp._results import map_result
        from dsh.mcp._server import McpCallError

        connection = entry.connection
        try:
            await connection.ensure_ready(self._spawn)
            result = await connection.call(entry.tool, arguments, execution.signal)
        except McpCallError as exc:
            return replace(error_result(execution.call_id, exc), display=display)
        content, is_error = map_result(result, images=state.images)
        return ToolResult(execution.call_id, content, is_error=is_error, display=display)


@plugin("mcp", inject=("tools", "llm"))
def mcp_plugin(ctx: Context, options: McpOptions) -> None:
    """Provide ``mcp``. Registering costs nothing: the SDK is imported when a session first has servers."""
    manager = McpManager(ctx, options)
    ctx.on(ev.AGENT_REQUEST, manager.on_request)
    ctx.on(ev.TOOLS_EXECUTE, manager.on_execute)

    ctx.on(ev.AGENT_DISPOSED, manager.agent_disposed)
    ctx.effect(manager.at_exit)
    ctx.provide("mcp", manager)
