"""Frames checked against the ACP JSON schemas of the TypeScript SDK 2.4.0 (``tests/acp_schema``), and a client of
our own that advertises the December-2026 capabilities, over real pipes (RFC 0033).

Which schema: a frame that carries a type stabilised on 2026-11-20 (``subagent_update``, ``session_message``,
``session_message_chunk``, ``plan_update``, ``plan_removed``, ``SystemPrompt``, ``session/set_title``, the
capabilities that announce them, ``PromptResponse.usage``) is validated against ``schema.unstable.json``, where 2.4.0
defines them; every other frame against ``schema.json``. Tool call content ``{"type": "session", "sessionId"}``
(the link from a ``task`` card to its child) postdates 2.4.0's files: its shape is checked here exactly, then the
rest of the frame is validated without it.

:class:`ModernClient` guarantees: every line the daemon writes passes :func:`~tests.support.raw.check_frame` and
:func:`check_message` (problems are collected, and the ``async with`` fails on any), every request it sends is
checked the same way before it goes out, every request the daemon sends is answered by the test's handler.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from functools import cache
from pathlib import Path
from typing import Any

import anyio

from tests.support.raw import RawDaemon, spawn_daemon

__all__ = [
    "ALL_CAPABILITIES",
    "NEW_UPDATES",
    "ModernClient",
    "check_message",
    "modern_client",
]

SCHEMAS = Path(__file__).resolve().parents[1] / "acp_schema"
NEW_UPDATES = frozenset({"subagent_update", "session_message", "session_message_chunk", "plan_update", "plan_removed"})
ALL_CAPABILITIES: dict[str, Any] = {
    "fs": {"readTextFile": False, "writeTextFile": False},
    "terminal": False,
    "session": {"notices": {}},
    "subagents": {},
    "plan": {},
}
"""A client that advertises every capability RFC 0033 gates on (and no editor delegation)."""

_RESULTS = {
    "initialize": "InitializeResponse",
    "authenticate": "AuthenticateResponse",
    "session/new": "NewSessionResponse",
    "session/load": "LoadSessionResponse",
    "session/resume": "ResumeSessionResponse",
    "session/prompt": "PromptResponse",
    "session/list": "ListSessionsResponse",
    "session/close": "CloseSessionResponse",
    "session/delete": "DeleteSessionResponse",
    "session/set_mode": "SetSessionModeResponse",
    "session/set_config_option": "SetSessionConfigOptionResponse",
    "session/set_title": "SetSessionTitleResponse",
}
_REQUESTS = {
    "initialize": "InitializeRequest",
    "session/new": "NewSessionRequest",
    "session/load": "LoadSessionRequest",
    "session/resume": "ResumeSessionRequest",
    "session/prompt": "PromptRequest",
    "session/list": "ListSessionsRequest",
    "session/close": "CloseSessionRequest",
    "session/cancel": "CancelNotification",
    "session/set_mode": "SetSessionModeRequest",
    "session/set_title": "SetSessionTitleRequest",
    "session/request_permission": "RequestPermissionRequest",
}
_UNSTABLE_ONLY = frozenset({"session/set_title"})


@cache
def _schema(unstable: bool) -> dict[str, Any]:
    name = "schema.unstable.json" if unstable else "schema.json"
    loaded: dict[str, Any] = json.loads((SCHEMAS / name).read_text(encoding="utf-8"))
    return loaded


@cache
def _validator(unstable: bool, definition: str) -> Any:
    from jsonschema import Draft202012Validator

    schema = _schema(unstable)
    if definition not in schema["$defs"]:
        raise KeyError(f"{definition} is not defined in {'schema.unstable.json' if unstable else 'schema.json'}")
    return Draft202012Validator({"$ref": f"#/$defs/{definition}", "$defs": schema["$defs"]})


def _validate(unstable: bool, definition: str, value: Any, where: str, problems: list[str]) -> None:
    errors = sorted(_validator(unstable, definition).iter_errors(value), key=lambda e: list(e.path))
    for error in errors[:3]:
        name = "unstable" if unstable else "stable"
        problems.append(
            f"{where}: not a valid {definition} ({name} schema) at {list(error.path)}: {error.message[:300]}"
        )


def _without_session_links(update: dict[str, Any], where: str, problems: list[str]) -> dict[str, Any]:
    content = update.get("content")
    if update.get("sessionUpdate") not in ("tool_call", "tool_call_update") or not isinstance(content, list):
        return update
    kept = []
    for item in content:
        if isinstance(item, dict) and item.get("type") == "session":
            if set(item) != {"type", "sessionId"} or not isinstance(item["sessionId"], str):
                problems.append(f"{where}: malformed session tool call content {item!r}")
            continue
        kept.append(item)
    return {**update, "content": kept}


def _unstable_capabilities(value: dict[str, Any]) -> bool:
    caps = value.get("clientCapabilities") or {}
    agent = (value.get("agentCapabilities") or {}).get("sessionCapabilities") or {}
    return bool(
        "subagents" in caps or "plan" in caps or "systemPrompt" in agent or "title" in agent or "systemPrompt" in value
    )


def check_message(message: dict[str, Any], methods: Mapping[Any, str], where: str) -> list[str]:
    """Every schema problem with one JSON-RPC *message* (either direction); *methods* maps request ids to methods
    (for results)."""
    problems: list[str] = []
    method = message.get("method")
    if isinstance(method, str):
        params = message.get("params")
        if method == "session/update" and isinstance(params, dict) and isinstance(params.get("update"), dict):
            update = _without_session_links(params["update"], where, problems)
            unstable = update.get("sessionUpdate") in NEW_UPDATES
            _validate(unstable, "SessionNotification", {**params, "update": update}, where, problems)
        elif method.startswith("_"):
            pass  # extension methods: dsh's own, checked by their tests
        elif method in _REQUESTS:
            unstable = method in _UNSTABLE_ONLY or (isinstance(params, dict) and _unstable_capabilities(params))
            _validate(unstable, _REQUESTS[method], params, f"{where} ({method})", problems)
        else:
            problems.append(f"{where}: no schema known for {method!r}")
        return problems
    if "error" in message:
        error = message["error"]
        if not isinstance(error, dict) or not {"code", "message"} <= set(error) <= {"code", "message", "data"}:
            problems.append(f"{where}: malformed error {error!r}")
        return problems
    method = methods.get(message.get("id"))
    if method is None:
        problems.append(f"{where}: a response to no request: {message!r:.200}")
        return problems
    result = message.get("result")
    if method.startswith("_"):
        return problems  # an extension method's result: dsh's own, checked by its tests (e.g. tests/beyond_turn)
    if method == "session/request_permission":
        _validate(False, "RequestPermissionResponse", result, where, problems)
        return problems
    if isinstance(result, dict) and "models" in result:
        result = {key: value for key, value in result.items() if key != "models"}  # legacy state (tests/support/sdk)
    unstable = method in _UNSTABLE_ONLY or (
        isinstance(result, dict) and (_unstable_capabilities(result) or "usage" in result)
    )
    _validate(unstable, _RESULTS[method], result, f"{where} ({method} result)", problems)
    return problems


Handler = Callable[[str, dict[str, Any]], Awaitable[Any]]


async def _no_requests(method: str, params: dict[str, Any]) -> Any:
    raise AssertionError(f"unexpected request from the daemon: {method} {params!r:.300}")


class ModernClient:
    """A JSON-RPC client of the daemon: requests by id, the daemon's requests answered by *handler*."""

    def __init__(self, daemon: RawDaemon, handler: Handler) -> None:
        self.daemon = daemon
        self.handler = handler
        self.messages: list[dict[str, Any]] = []
        """Everything the daemon sent, in order."""
        self.problems: list[str] = []
        self._methods: dict[Any, str] = {}
        self._answers: dict[Any, dict[str, Any]] = {}
        self._arrived = anyio.Event()
        self._ids = 0
        self._group: Any = None

    async def _read(self) -> None:
        while True:
            try:
                message = await self.daemon.read()
            except (anyio.IncompleteRead, anyio.EndOfStream):
                return
            where = f"daemon frame {len(self.messages)}"
            self.messages.append(message)
            self.problems += check_message(message, self._methods, where)
            if "method" in message and "id" in message:
                self._group.start_soon(self._answer, message)
            elif "method" not in message:
                self._answers[message.get("id")] = message
            self._arrived.set()
            self._arrived = anyio.Event()

    async def _answer(self, message: dict[str, Any]) -> None:
        self._methods[message["id"]] = message["method"]
        result = await self.handler(message["method"], message.get("params") or {})
        reply = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        self.problems += check_message(reply, self._methods, f"our answer to {message['method']}")
        await self.daemon.send(reply)

    async def send_request(self, method: str, params: dict[str, Any]) -> int:
        self._ids += 1
        rid = self._ids
        self._methods[rid] = method
        frame = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        self.problems += check_message(frame, self._methods, f"our {method}")
        await self.daemon.send(frame)
        return rid

    async def response(self, rid: int) -> dict[str, Any]:
        with anyio.fail_after(45):
            while rid not in self._answers:
                await self._arrived.wait()
        return self._answers.pop(rid)

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a request and return its response (``result`` or ``error``)."""
        return await self.response(await self.send_request(method, params))

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        """A request that must succeed: its result."""
        response = await self.request(method, params)
        assert "result" in response, f"{method} failed: {response!r:.500}"
        return response["result"]

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        frame = {"jsonrpc": "2.0", "method": method, "params": params}
        self.problems += check_message(frame, self._methods, f"our {method}")
        await self.daemon.send(frame)

    async def wait_for(self, predicate: Callable[[dict[str, Any]], bool], limit: float = 30) -> dict[str, Any]:
        """The first message so far (or to come) that satisfies *predicate* (within *limit* seconds)."""
        with anyio.fail_after(limit):
            while True:
                for message in self.messages:
                    if predicate(message):
                        return message
                await self._arrived.wait()

    def updates(self, session_id: str | None = None, since: int = 0) -> list[dict[str, Any]]:
        """The ``session/update`` payloads (with ``sessionId`` folded in as ``_session``) from message *since*."""
        found = []
        for message in self.messages[since:]:
            if message.get("method") == "session/update":
                params = message["params"]
                if session_id is None or params["sessionId"] == session_id:
                    found.append({**params["update"], "_session": params["sessionId"]})
        return found

    async def new_session(self, cwd: Path | str, **extra: Any) -> str:
        result = await self.call("session/new", {"cwd": str(cwd), "mcpServers": [], **extra})
        session_id: str = result["sessionId"]
        return session_id

    async def prompt(self, session_id: str, text: str) -> dict[str, Any]:
        return await self.request(
            "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
        )


@asynccontextmanager
async def modern_client(
    tmp_path: Path,
    model: str,
    capabilities: dict[str, Any] | None = None,
    *,
    handler: Handler = _no_requests,
    plugins: str | None = None,
    env: Mapping[str, str] | None = None,
    name: str = "stderr.log",
) -> AsyncIterator[tuple[ModernClient, dict[str, Any]]]:
    """A daemon (data in ``tmp_path / "data"``, shared by every daemon of the test) and a client that initialized
    it with *capabilities* (default :data:`ALL_CAPABILITIES`); yields the client and the ``initialize`` result.
    On a clean exit every frame both ways must have passed the schemas."""
    environment = {"DSH_DATA_DIR": str(tmp_path / "data"), "XDG_DATA_HOME": str(tmp_path / "data"), **(env or {})}
    async with spawn_daemon(model=model, plugins=plugins, stderr_path=tmp_path / name, env=environment) as daemon:
        client = ModernClient(daemon, handler)
        async with anyio.create_task_group() as group:
            client._group = group
            group.start_soon(client._read)
            init = await client.call(
                "initialize",
                {
                    "protocolVersion": 1,
                    "clientCapabilities": ALL_CAPABILITIES if capabilities is None else capabilities,
                    "clientInfo": {"name": "dsh-modern-tests", "version": "0"},
                },
            )
            yield client, init
            group.cancel_scope.cancel()
    assert not client.problems, "\n".join(client.problems[:20])
