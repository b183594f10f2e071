"""One MCP server of one session: connect in the background, keep its tool list, call its tools.

Guarantees:

* :meth:`ServerConnection.run` never raises: whatever happens (cannot start, handshake fails or exceeds the
  spec's timeout, crashes, is closed) ends in a state (``failed``, ``crashed``, ``closed``) with a one-line
  ``failure`` that says why, logged once. ``settled`` is set as soon as the server is ``ready`` or gave up.
* ``notifications/tools/list_changed`` makes the connection list the tools again and call ``on_tools``.
* :meth:`call` aborts when the call's cancel token fires: the request is abandoned and the server is sent
  ``notifications/cancelled`` for it. A crashed stdio server is started again once, on the next call.
* The SDK is imported in a worker thread on first use, so a session that has servers never stalls the event loop
  for the import (a daemon that never sees a server never imports it at all).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal

import anyio

from dsh._log import get_logger
from dsh.errors import DshError
from dsh.mcp._stdio import CLOSE_GRACE

if TYPE_CHECKING:
    from dsh.kernel import CancelToken
    from dsh.mcp._config import ServerSpec
    from dsh.mcp._stdio import StdioProcess

__all__ = ["McpCallError", "ServerConnection", "describe_error", "load_sdk"]

log = get_logger("dsh.mcp")
State = Literal["connecting", "ready", "failed", "crashed", "closed"]
MAX_RESTARTS = 1
_sdk_loaded = False
_sdk_lock: anyio.Lock | None = None


class McpCallError(DshError):
    default_code = "MCP_CALL_FAILED"


async def load_sdk() -> None:
    """Import the SDK's client side in a worker thread (once per process)."""
    global _sdk_loaded, _sdk_lock
    if _sdk_loaded:
        return
    if _sdk_lock is None:
        _sdk_lock = anyio.Lock()
    async with _sdk_lock:
        if not _sdk_loaded:

            def load() -> None:
                import mcp.client.session
                import mcp.types  # noqa: F401

            await anyio.to_thread.run_sync(load, abandon_on_cancel=True)  # a close need not wait for it
            _sdk_loaded = True


def describe_error(error: BaseException) -> str:
    """A one-line reason from an exception (exception groups: their first leaf)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    inner = getattr(error, "error", None)  # McpError carries ErrorData
    message = getattr(inner, "message", None) or str(error) or type(error).__name__
    if isinstance(error, FileNotFoundError | PermissionError) and error.filename:
        message = f"{error.strerror}: {error.filename}"
    return " ".join(str(message).split())[:500]


def _missing_command(spec: ServerSpec, cwd: str | None) -> str | None:
    """``command not found: NAME`` when a stdio server's command cannot be run (not on the ``PATH`` it gets, or a
    path that does not exist); None otherwise, and for HTTP and SSE servers."""
    import os
    import shutil

    if spec.transport != "stdio" or not spec.command:
        return None
    command = spec.command
    if "/" in command:
        path = os.path.join(cwd or os.getcwd(), os.path.expanduser(command))
        return None if os.access(path, os.X_OK) and not os.path.isdir(path) else f"command not found: {command}"
    search = spec.env.get("PATH") or os.environ.get("PATH") or os.defpath
    return None if shutil.which(command, path=search) is not None else f"command not found: {command} (not on PATH)"


class ServerConnection:
    def __init__(
        self, spec: ServerSpec, *, cwd: str | None, on_tools: Callable[[ServerConnection], Awaitable[None]]
    ) -> None:
        self.spec = spec
        self.name = spec.name
        self.cwd = spec.cwd or cwd
        self.state: State = "connecting"
        self.failure: str | None = spec.problem
        self.tools: list[Any] = []
        self.settled = anyio.Event()
        self.attempts = 0
        self.pid: int | None = None
        self._info: StdioProcess | None = None
        self._on_tools = on_tools
        self._session: Any = None
        self._stop = anyio.Event()
        self._closing = False
        self._scope: anyio.CancelScope | None = None
        self._done = anyio.Event()
        self._list_changed = anyio.Event()
        self._changes = 0
        self._tools_current = anyio.Event()
        self._tools_current.set()
        if spec.problem is not None:
            self.state = "failed"
            self.settled.set()
            self._done.set()

    # -- lifecycle ----------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Connect and serve until closed or lost (see the module docstring); never raises."""
        if self.spec.problem is not None:
            log.warning("mcp server not started", server=self.name, reason=self.spec.problem)
            return
        self.attempts += 1
        self.state = "connecting"
        self._done = anyio.Event()
        self._stop = anyio.Event()
        reason: str | None = None
        try:
            missing = _missing_command(self.spec, self.cwd)
            if missing is not None:  # said at once, never as a timeout (issue 43): nothing to wait for
                self.state = "failed"
                self.failure = missing
                log.warning("mcp server did not start", server=self.name, reason=missing)
                return
            await load_sdk()  # before the clock starts: on a loaded machine the import alone can take seconds
            with anyio.CancelScope(deadline=anyio.current_time() + self.spec.timeout) as scope:
                self._scope = scope
                try:
                    await self._serve(scope)
                except Exception as exc:
                    reason = describe_error(exc)
            if self._closing:
                self.state = "closed"
            elif self.state == "connecting":
                self.state = "failed"
                if scope.cancelled_caught:
                    reason = f"no answer within {self.spec.timeout:g} s"
                self.failure = reason or "it stopped during start-up"
                log.warning("mcp server did not start", server=self.name, reason=self.failure)
            else:
                self.state = "crashed"
                self.failure = reason or "it stopped"
                log.warning("mcp server stopped", server=self.name, reason=self.failure)
        finally:
            self._session = None
            self._scope = None
            self.settled.set()
            self._done.set()

    @asynccontextmanager
    async def _transport(self) -> AsyncIterator[tuple[Any, Any, StdioProcess | None]]:
        spec = self.spec
        if spec.transport == "stdio":
            from dsh.mcp._stdio import stdio_transport
            from dsh.secrets import child_environment

            env = {**child_environment(), **spec.env}  # our secrets withheld, the server's own env on top
            async with stdio_transport(self.name, spec.command, list(spec.args), env, self.cwd) as (read, write, info):
                yield read, write, info
        elif spec.transport == "http":
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            async with (
                create_mcp_http_client(headers=dict(spec.headers)) as client,
                streamable_http_client(spec.url, http_client=client) as (read, write, _session_id),
            ):
                yield read, write, None
        else:
            from mcp.client.sse import sse_client

            async with sse_client(spec.url, headers=dict(spec.headers), timeout=spec.timeout) as (read, write):
                yield read, write, None

    async def _serve(self, scope: anyio.CancelScope) -> None:
        from mcp.client.session import ClientSession
        from mcp.types import Implementation

        from dsh import __version__

        async with self._transport() as (read, write, info):
            if info is not None:
                self.pid = info.pid
                self._info = info
            async with ClientSession(
                read,
                write,
                message_handler=self._on_message,
                client_info=Implementation(name="dsh", version=__version__),
            ) as session:
                try:
                    await session.initialize()
                    self.tools = await self._list(session)
                except Exception as exc:
                    reason = describe_error(exc)
                    raise McpCallError(reason + (info.reason() if info is not None else "")) from None
                scope.deadline = math.inf
                self._session = session
                self.state = "ready"
                self.failure = None
                log.info("mcp server ready", server=self.name, tools=len(self.tools), attempt=self.attempts)
                await self._notify_tools()
                self.settled.set()
                async with anyio.create_task_group() as group:
                    group.start_soon(self._refresh, session)
                    if info is not None:
                        group.start_soon(self._watch_exit, info)
                    await self._stop.wait()
                    group.cancel_scope.cancel()
                if not self._closing and info is not None and info.exited.is_set():
                    raise McpCallError("the server process exited" + info.reason())

    async def _watch_exit(self, info: StdioProcess) -> None:
        await info.exited.wait()
        self._stop.set()

    async def _list(self, session: Any) -> list[Any]:
        tools: list[Any] = []
        cursor: str | None = None
        while True:
            page = await session.list_tools(cursor) if cursor else await session.list_tools()
            tools.extend(page.tools)
            cursor = page.nextCursor
            if not cursor:
                return tools

    async def _on_message(self, message: Any) -> None:
        from mcp import types

        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.ToolListChangedNotification
        ):
            self._changes += 1
            if self._tools_current.is_set():
                self._tools_current = anyio.Event()
            self._list_changed.set()
        elif isinstance(message, Exception):
            log.warning("mcp server sent something unreadable", server=self.name, error=describe_error(message))

    async def _refresh(self, session: Any) -> None:
        while True:
            await self._list_changed.wait()
            self._list_changed = anyio.Event()
            wanted = self._changes
            try:
                self.tools = await self._list(session)
                log.info("mcp tools changed", server=self.name, tools=len(self.tools))
                await self._notify_tools()
            except Exception as exc:
                log.warning("mcp tools/list after list_changed failed", server=self.name, error=describe_error(exc))
            if wanted >= self._changes:
                self._tools_current.set()

    async def tools_current(self) -> None:
        """Return once every ``list_changed`` received so far has been acted on (the caller bounds the wait)."""
        while not self._tools_current.is_set() and self.state == "ready":
            await self._tools_current.wait()

    async def _notify_tools(self) -> None:
        try:
            await self._on_tools(self)
        except Exception:
            log.exception("mcp tool registration failed", server=self.name)

    async def close(self, *, hurry: bool = False) -> None:
        """Stop the server (bounded: the transport ends the process group itself) and wait for it; *hurry*
        (the daemon is exiting): a stdio server gets SIGTERM at once rather than time to notice its stdin closed."""
        self._closing = True
        if hurry and self._info is not None:
            self._info.hurry = True
        self._stop.set()
        if self.state == "connecting" and self._scope is not None:
            self._scope.cancel()
        with anyio.move_on_after(3.0):
            await self._done.wait()
        if not self._done.is_set() and self._scope is not None:
            self._scope.cancel()

    # -- calls --------------------------------------------------------------------------------------------

    async def _wait_lost(self) -> None:
        """Give run() the time to see a lost stdio server end (bounded by the start-up timeout; normally at once)."""
        with anyio.move_on_after(max(self.spec.timeout, 2 * CLOSE_GRACE)):
            await self._done.wait()

    async def ensure_ready(self, spawn: Callable[[ServerConnection], None]) -> None:
        """A crashed stdio server is started again once (via *spawn*), and awaited; otherwise a no-op. A server
        whose process is gone but whose end run() has not processed yet is waited for first."""
        info = self._info
        if self.state == "ready" and info is not None and (info.exited.is_set() or self._stop.is_set()):
            await self._wait_lost()
        if self.state == "crashed" and self.spec.transport == "stdio" and self.attempts <= MAX_RESTARTS:
            log.info("restarting crashed mcp server", server=self.name)
            self.settled = anyio.Event()
            self.state = "connecting"
            spawn(self)
            await self.settled.wait()

    async def call(self, tool: str, arguments: dict[str, Any], signal: CancelToken | None) -> Any:
        """Call *tool*; raise :class:`McpCallError` when the server is not there or the call failed at the
        protocol level, ``AbortedError`` when *signal* fired (after telling the server)."""
        from dsh.kernel import AbortedError

        session = self._session
        if session is None or self.state != "ready":
            raise McpCallError(f"MCP server `{self.name}` is not available: {self.failure or self.state}")
        if signal is not None:
            signal.raise_if_aborted()
        request_id = session._request_id  # the id call_tool is about to use (assigned synchronously)
        result: Any = None
        with anyio.CancelScope() as call_scope:
            remove = signal.add_callback(lambda _reason: call_scope.cancel()) if signal is not None else None
            try:
                result = await session.call_tool(tool, arguments)
            except Exception as exc:
                reason = describe_error(exc)
                lost = isinstance(exc, anyio.ClosedResourceError | anyio.BrokenResourceError)
                if lost or self.state != "ready" or "connection closed" in reason.lower():
                    if self.spec.transport == "stdio":  # let run() see the exit, so the next call restarts it
                        await self._wait_lost()
                    raise McpCallError(f"MCP server `{self.name}` stopped during the call: {reason}") from None
                raise McpCallError(f"MCP server `{self.name}`: {reason}") from None
            finally:
                if remove is not None:
                    remove()
        if call_scope.cancelled_caught:
            await self._send_cancel(session, request_id)
            raise AbortedError(signal.reason if signal is not None and signal.reason else "cancelled")
        return result

    async def _send_cancel(self, session: Any, request_id: int) -> None:
        from mcp import types

        notification = types.ClientNotification(
            types.CancelledNotification(
                params=types.CancelledNotificationParams(requestId=request_id, reason="cancelled by the user")
            )
        )
        with anyio.CancelScope(shield=True), anyio.move_on_after(1.0), contextlib.suppress(Exception):
            await session.send_notification(notification)
            log.info("mcp call cancelled", server=self.name, request_id=request_id)
