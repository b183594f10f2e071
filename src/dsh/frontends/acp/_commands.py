"""The ACP projection of slash commands: what a session offers, when the client hears of it, and how a command
takes its place in the session's prompt queue.

Guarantees:

* ``available_commands_update`` goes out *after* the response to ``session/new``, ``session/load`` and
  ``session/resume`` (after the replay: some clients hang when it comes first), and again whenever the offered
  set changes (a plugin registers or withdraws one, a Markdown command file appears).
* A command waits its turn: it runs once every prompt sent before it has been answered and the agent is idle,
  and a prompt sent after it reaches the agent only once the command has finished. A ``session/cancel`` covers
  a waiting command like a waiting prompt (answered ``cancelled``, never run).
* ``/model`` and ``/mode`` switch through the same code as the pickers and tell the client the new
  configuration (``config_option_update``; ``current_mode_update`` for modes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from dsh import events as ev
from dsh.commands import Command, CommandResult, Invocation, match_command, run_command
from dsh.frontends.acp._rpc import RpcError

if TYPE_CHECKING:
    from dsh.frontends.acp._ports import FrontendPort
    from dsh.frontends.acp._session import AcpSession
    from dsh.kernel import Context

__all__ = ["CommandDesk"]


@dataclass(eq=False)
class _Queue:
    offered: list[Command] = field(default_factory=list)
    tail: anyio.Event | None = None
    """Set when the last command queued in this session has finished."""


class _Controls:
    """:class:`dsh.commands.SessionControls` for one ACP session."""

    def __init__(self, ctx: Context, frontend: FrontendPort, record: AcpSession) -> None:
        self._ctx = ctx
        self._frontend = frontend
        self._record = record

    @property
    def session_id(self) -> str:
        return self._record.id

    @property
    def cwd(self) -> str:
        return self._record.cwd

    @property
    def model(self) -> str:
        return self._record.model

    @property
    def mode(self) -> str:
        return self._record.policy.mode

    def models(self) -> list[tuple[str, str]]:
        return [(model, self._frontend.pickers.model_name(model)) for model in self._frontend.pickers.offered_models()]

    def modes(self) -> list[tuple[str, str, str]]:
        from dsh.policy import MODES

        return [(mode.id, mode.name, mode.description) for mode in MODES]

    def switch_model(self, model: str) -> None:
        try:
            self._frontend.pickers.switch_model(self._record, model)
        except RpcError as exc:
            raise ValueError(exc.message) from None
        self._frontend.pickers.announce(self._record)

    def switch_mode(self, mode: str) -> None:
        try:
            self._frontend.pickers.switch_mode(self._record, mode)
        except RpcError as exc:
            raise ValueError(exc.message) from None
        self._frontend.pickers.announce(self._record)

    def status(self) -> list[tuple[str, str]]:
        record, ctx = self._record, self._ctx
        session = record.handle.agent.session
        usage = session.last("usage")
        used = 0
        if usage is not None:
            tokens = usage.data.get("usage") or {}
            used = int(tokens.get("input_tokens") or 0) + int(tokens.get("output_tokens") or 0)
        window = ctx.llm.model_info(record.model).context_window
        rows = [("Context", f"{used:,} of {window:,} tokens" if window else f"{used:,} tokens (window unknown)")]
        persistence = ctx.get("session_persistence")
        path_of = getattr(persistence, "path_of", None)
        rows.append(("Session file", str(path_of(record.id)) if path_of is not None else "not stored"))
        manager = ctx.get("mcp")
        servers = manager.servers(record.id) if manager is not None else {}
        rows.append(("MCP servers", ", ".join(f"{name} ({state})" for name, state in servers.items()) or "none"))
        background = ctx.get("background_commands")
        if background is not None:
            rows.append(("Background commands", background.describe(record.id)))
        sandbox = ctx.get("sandbox")
        if sandbox is not None:
            rows.append(("Sandbox", sandbox.describe(record.id)))
        spend = ctx.get("spend")
        if spend is not None:
            rows.append(("Budget", spend.describe(record.id)))
        return rows


class CommandDesk:
    def __init__(self, ctx: Context, frontend: FrontendPort) -> None:
        self._ctx = ctx
        self._frontend = frontend
        self._queues: dict[str, _Queue] = {}

    def _registry(self) -> Any:
        return self._ctx.get("commands")

    def _queue(self, record: AcpSession) -> _Queue:
        queue = self._queues.get(record.id)
        if queue is None:
            queue = self._queues[record.id] = _Queue()
        return queue

    def _offer(self, record: AcpSession) -> list[Command]:
        registry = self._registry()
        return registry.for_session(record.cwd) if registry is not None else []

    # -- announcing ---------------------------------------------------------------------------------------

    def opened(self, record: AcpSession) -> None:
        """A session was created or reopened: announce its commands once the response is out."""
        queue = self._queue(record)
        queue.offered = self._offer(record)
        self._frontend.connection.after_response(lambda: self._announce(record.id))

    def closed(self, session_id: str) -> None:
        self._queues.pop(session_id, None)

    def on_change(self) -> None:
        """``commands/change``: re-announce to every session whose offer changed."""
        for session_id in list(self._queues):
            record = self._frontend.session_record(session_id)
            if record is not None:
                self._refresh(record)

    def _refresh(self, record: AcpSession) -> list[Command]:
        queue = self._queue(record)
        offered = self._offer(record)
        if [(c.name, c.description, c.input_hint) for c in offered] != [
            (c.name, c.description, c.input_hint) for c in queue.offered
        ]:
            queue.offered = offered
            self._announce(record.id)
        return queue.offered

    def _announce(self, session_id: str) -> None:
        queue = self._queues.get(session_id)
        if queue is None or self._frontend.session_record(session_id) is None:
            return
        commands = []
        for command in queue.offered:
            entry: dict[str, Any] = {"name": command.name, "description": command.description}
            if command.input_hint:
                entry["input"] = {"hint": command.input_hint}
            commands.append(entry)
        self._frontend.tool_update(
            session_id, {"sessionUpdate": "available_commands_update", "availableCommands": commands}
        )

    # -- running ------------------------------------------------------------------------------------------

    def match(self, record: AcpSession, prompt: list[Any]) -> tuple[Command, str] | None:
        """The command *prompt* invokes, if any (the offer is refreshed first: a new Markdown file counts)."""
        first = prompt[0] if prompt else None
        if not (isinstance(first, dict) and str(first.get("text", "")).lstrip().startswith("/")):
            return None
        return match_command(prompt, self._refresh(record))

    async def wait_turn(self, record: AcpSession) -> None:
        """Wait until every command sent before now has finished (called by every prompt before it queues)."""
        tail = self._queue(record).tail
        if tail is not None:
            await tail.wait()

    async def run(self, record: AcpSession, command: Command, args: str, number: int) -> CommandResult | None:
        """Run *command* in its turn; None when a cancel overtook it (the prompt is answered ``cancelled``)."""
        queue = self._queue(record)
        previous, mine = queue.tail, anyio.Event()
        queue.tail = mine
        earlier = [prompt.done for prompt in record.prompts if not prompt.settled]
        try:
            if previous is not None:
                await previous.wait()
            for done in earlier:
                await done.wait()
            agent = record.handle.agent
            await agent.when_idle()
            if number < record.cancelled_at:
                return None
            invocation = Invocation(
                command.name, args, agent, _Controls(self._ctx, self._frontend, record), queue.offered
            )
            return await run_command(self._ctx, invocation, command)
        finally:
            mine.set()
            if queue.tail is mine:
                queue.tail = None


def commands_hooks(ctx: Context, desk: CommandDesk) -> None:
    """Wire the desk to ``commands/change`` (owned by the calling plugin's scope)."""
    ctx.on(ev.COMMANDS_CHANGE, desk.on_change)
