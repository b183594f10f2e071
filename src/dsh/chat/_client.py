"""The chat's side of ACP: one agent connection, one session at a time.

What this module guarantees:

* ``initialize`` advertises exactly what the chat serves: ``fs.readTextFile``, ``fs.writeTextFile`` and
  ``terminal`` (served by :mod:`dsh.chat._fs` and :mod:`dsh.chat._terminals`); any other agent request is
  answered -32601.
* Every ``session/request_permission`` is answered once: the view's choice, or ``cancelled`` when the turn is
  cancelled while it is asked (ACP: "The Client MUST respond to all pending session/request_permission requests
  with the cancelled outcome").
* The session's state (:class:`~dsh.chat._state.SessionState`) is updated before the view sees an update, so
  the view always draws from state that includes it.
* A *careful* client (an agent given with ``--agent``, unless ``--trust-agent``; issue 34 item 3) asks the user
  before it serves ``fs/read_text_file`` or ``fs/write_text_file`` of a path outside the working directory (its
  real location: a symlink inside that leads out counts as outside) and before every ``terminal/create``; the
  question is drawn like a permission request (the path or the command, sanitised; a write's content as a
  diff). A refusal answers the request -32603 "the user refused …"; nothing is read, written or run.

Nothing here draws: the view (:class:`ChatView`) decides what a person or a script sees.
"""

from __future__ import annotations

import os
import shlex
from typing import Any, Protocol

import anyio
from anyio.abc import TaskGroup

from dsh.chat._agent import AgentProcess
from dsh.chat._fs import read_text_file, write_text_file
from dsh.chat._rpc import Connection, RpcError
from dsh.chat._secrets import sealed
from dsh.chat._state import SessionState
from dsh.chat._terminals import Terminal, Terminals

__all__ = ["AcpClient", "ChatView"]

PROTOCOL_VERSION = 1
STEER_METHOD = "_dsh/session/steer"
STEER_META_KEY = "dsh.dev/steer"
"""dsh's extension request that steers a running turn, and the ``agentCapabilities._meta`` key that advertises
it (RFC 0036); the chat knows them as any client would, from the wire."""
LIST_PAGES = 20
"""At most this many ``session/list`` pages are read for ``--resume`` (a cursor loop never runs away)."""


class ChatView(Protocol):
    def on_update(self, update: dict[str, Any]) -> None: ...

    async def ask_permission(self, tool_call: dict[str, Any], options: list[dict[str, Any]]) -> str | None:
        """The chosen ``optionId``, or None for ``cancelled``."""
        ...

    def on_terminal(self, terminal: Terminal) -> None: ...


class AcpClient:
    def __init__(
        self,
        agent: AgentProcess,
        task_group: TaskGroup,
        cwd: str,
        view: ChatView,
        trace: Any = None,
        config: str | None = None,
        *,
        careful: bool = False,
    ):
        self.cwd = cwd
        self.config = config
        self.careful = careful
        self._task_group = task_group
        self.view = view
        self.state = SessionState()
        self.agent_info: dict[str, Any] = {}
        self.capabilities: dict[str, Any] = {}
        self.terminals = Terminals(task_group, cwd, config)
        self.terminals.changed.append(lambda terminal: self.view.on_terminal(terminal))
        self._asking: set[anyio.CancelScope] = set()
        self._early: list[dict[str, Any]] | None = None
        """Updates for a session being opened: the reader can see them before ``session/new``'s caller resumes
        (the ``available_commands_update`` right after the answer), so they wait here for :meth:`_begin`."""
        assert agent.process.stdin is not None and agent.process.stdout is not None
        self.connection = Connection(
            agent.process.stdin,
            agent.process.stdout,
            on_request=self._on_request,
            on_notification=self._on_notification,
            trace=trace,
        )
        task_group.start_soon(self.connection.run, task_group)

    # -- requests to the agent -------------------------------------------------------------------------------

    async def initialize(self) -> None:
        from dsh import __version__

        self._task_group.start_soon(sealed, self.config)  # while the agent starts; awaited by prompt()
        result = await self.connection.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True},
                "clientInfo": {"name": "dsh-chat", "title": "dsh chat", "version": __version__},
            },
        )
        result = result if isinstance(result, dict) else {}
        self.capabilities = result.get("agentCapabilities") or {}
        self.agent_info = result.get("agentInfo") or {}

    def can(self, *keys: str) -> bool:
        """Whether the agent advertised the capability at *keys* (``loadSession``; ``sessionCapabilities``,
        ``list``: an object means yes)."""
        value: Any = self.capabilities
        for key in keys:
            if not isinstance(value, dict):
                return False
            value = value.get(key)
        return value is True or isinstance(value, dict)

    async def new_session(self) -> None:
        self._early = []
        try:
            result = await self.connection.request("session/new", {"cwd": self.cwd, "mcpServers": []})
            self._begin(result, result.get("sessionId") if isinstance(result, dict) else None)
        finally:
            self._early = None

    async def load_session(self, session_id: str) -> None:
        """Load a stored session; its replay reaches the view as updates before this returns."""
        self._begin({}, session_id)
        result = await self.connection.request(
            "session/load", {"sessionId": session_id, "cwd": self.cwd, "mcpServers": []}
        )
        self.state.apply_setup(result)

    def _begin(self, result: Any, session_id: Any) -> None:
        if not isinstance(session_id, str):
            raise RpcError(-32603, "the agent answered without a session id")
        self.state = SessionState(session_id=session_id)
        self.state.apply_setup(result)
        early, self._early = self._early or [], None
        for params in early:
            self._on_notification("session/update", params)

    async def list_sessions(self) -> list[dict[str, Any]]:
        sessions: list[dict[str, Any]] = []
        params: dict[str, Any] = {"cwd": self.cwd}
        for _ in range(LIST_PAGES):
            result = await self.connection.request("session/list", params)
            if not isinstance(result, dict):
                break
            sessions += [s for s in result.get("sessions") or [] if isinstance(s, dict) and "sessionId" in s]
            cursor = result.get("nextCursor")
            if not isinstance(cursor, str):
                break
            params = {"cwd": self.cwd, "cursor": cursor}
        return sessions

    async def prompt(self, blocks: list[dict[str, Any]]) -> str:
        """Run one turn; its stop reason (``end_turn``, ``cancelled``, …). The chat is sealed first (it started
        sealing at ``initialize``): nothing the model runs can read the keys from our ``/proc``."""
        await sealed(self.config)
        result = await self.connection.request("session/prompt", {"sessionId": self.session_id, "prompt": blocks})
        reason = result.get("stopReason") if isinstance(result, dict) else None
        return reason if isinstance(reason, str) else "end_turn"

    def steers(self) -> bool:
        """Whether the agent takes ``_dsh/session/steer`` (dsh advertises it in ``agentCapabilities._meta``)."""
        meta = self.capabilities.get("_meta")
        entry = meta.get(STEER_META_KEY) if isinstance(meta, dict) else None
        return isinstance(entry, dict) and entry.get("method") == STEER_METHOD

    async def steer(self, blocks: list[dict[str, Any]]) -> dict[str, Any]:
        """``_dsh/session/steer``: the text joins the running turn at its next step; the agent's answer (its
        ``outcome``: ``steered``, ``queued`` or ``cancelled``). An idle agent refuses it (an :class:`RpcError`)."""
        result = await self.connection.request(STEER_METHOD, {"sessionId": self.session_id, "prompt": blocks})
        return result if isinstance(result, dict) else {}

    async def cancel(self) -> None:
        """``session/cancel``, and every permission still being asked is answered ``cancelled``."""
        for scope in list(self._asking):
            scope.cancel()
        await self.connection.notify("session/cancel", {"sessionId": self.session_id})

    async def set_option(self, category: str, value: str) -> None:
        """Set the model or mode: ``session/set_config_option`` when the agent offers the option, else the legacy
        ``session/set_mode``."""
        option = self.state.option(category)
        if option is not None:
            result = await self.connection.request(
                "session/set_config_option",
                {"sessionId": self.session_id, "configId": option["id"], "value": value},
            )
            self.state.apply_setup(result)
        elif category == "mode" and self.state.modes is not None:
            await self.connection.request("session/set_mode", {"sessionId": self.session_id, "modeId": value})
            self.state.modes = {**self.state.modes, "currentModeId": value}
        else:
            raise RpcError(-32601, f"the agent offers no {category} choice")

    @property
    def session_id(self) -> str:
        if self.state.session_id is None:
            raise RpcError(-32603, "no session")
        return self.state.session_id

    # -- requests and notifications from the agent -----------------------------------------------------------

    def _on_notification(self, method: str, params: Any) -> None:
        if method != "session/update" or not isinstance(params, dict):
            return
        update = params.get("update")
        if not isinstance(update, dict):
            return
        if params.get("sessionId") != self.state.session_id:
            if self._early is not None:
                self._early.append(params)
            return
        self.state.apply(update)
        self.view.on_update(update)

    async def _on_request(self, method: str, params: Any) -> Any:
        if method == "session/request_permission":
            return await self._permission(params)
        if self.careful and method in ("fs/read_text_file", "fs/write_text_file", "terminal/create"):
            await self._consent(method, params)
        if method == "fs/read_text_file":
            return await read_text_file(params)
        if method == "fs/write_text_file":
            return await write_text_file(params)
        if method.startswith("terminal/"):
            return await self.terminals.handle(method, params)
        raise RpcError(-32601, "Method not found", {"method": method})

    async def _consent(self, method: str, params: Any) -> None:
        """Ask the user before serving a careful request (see the module docstring); raises when refused."""
        if not isinstance(params, dict):
            return  # the handler answers -32602
        if method == "terminal/create":
            command = params.get("command")
            args = params.get("args") or []
            if not isinstance(command, str) or not isinstance(args, list):
                return
            shown = shlex.join([command, *(str(a) for a in args)])
            card: dict[str, Any] = {"title": "The agent wants to run a command", "kind": "execute"}
            card["rawInput"] = {"command": shown}
            what = f"run {shown}"
        else:
            path = params.get("path")
            if not isinstance(path, str) or not os.path.isabs(path) or _inside(path, self.cwd):
                return
            write = method == "fs/write_text_file"
            card = {"title": f"The agent wants to {'write' if write else 'read'} {path} (outside {self.cwd})"}
            card["kind"] = "edit" if write else "read"
            if write and isinstance(params.get("content"), str):
                card["content"] = [{"type": "diff", "path": path, "oldText": None, "newText": params["content"]}]
            what = f"{'write' if write else 'read'} {path}"
        card["toolCallId"] = f"client-{method}"
        options = [
            {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
            {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
        ]
        if await self._ask(card, options) != "allow":
            raise RpcError(-32603, f"the user refused to let the agent {what}")

    async def _permission(self, params: Any) -> dict[str, Any]:
        if not isinstance(params, dict) or not isinstance(params.get("options"), list):
            raise RpcError(-32602, "Invalid params")
        raw = params.get("toolCall")
        tool_call: dict[str, Any] = raw if isinstance(raw, dict) else {}
        options = [o for o in params["options"] if isinstance(o, dict) and "optionId" in o]
        choice = await self._ask(tool_call, options)
        if choice is None:
            return {"outcome": {"outcome": "cancelled"}}
        return {"outcome": {"outcome": "selected", "optionId": choice}}

    async def _ask(self, tool_call: dict[str, Any], options: list[dict[str, Any]]) -> str | None:
        """The view's choice among *options*; None when the turn is cancelled while it asks."""
        choice: str | None = None
        with anyio.CancelScope() as scope:
            self._asking.add(scope)
            try:
                choice = await self.view.ask_permission(tool_call, options)
            finally:
                self._asking.discard(scope)
        return choice


def _inside(path: str, cwd: str) -> bool:
    """Whether *path*'s real location (symlinks resolved, as far as they exist) is *cwd* or below it."""
    real, root = os.path.realpath(path), os.path.realpath(cwd)
    return real == root or real.startswith(root.rstrip("/") + "/")
