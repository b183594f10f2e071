"""Editor delegation: the built-in tools' file reads, writes and commands go through the editor when it offers.

Listeners on the workspace seam (``workspace/read``, ``workspace/write``, ``workspace/run``), for this front
end's sessions only, and only for what the client advertised in ``initialize``:

* ``fs.readTextFile`` → ``fs/read_text_file``: reads see unsaved editor buffers.
* ``fs.writeTextFile`` → ``fs/write_text_file``: the editor applies the edit (undo, review).
* ``terminal`` → ``terminal/create`` (``bash -c COMMAND``; a sandboxed command as ``python -m dsh.sandbox
  --level … -- bash -c COMMAND``, which confines itself before it runs the command: :mod:`dsh.sandbox`) (the card gets ``{type: "terminal", terminalId}`` at once, for live
  output), ``terminal/wait_for_exit`` raced against the timeout and the call's cancel signal, ``terminal/kill``
  when we stop it, ``terminal/output``, and always ``terminal/release``.
  ``terminal/create`` carries no ``env``: dsh adds no variable of its own to a command, and the editor's
  terminal environment (which never held our provider keys) is the editor's business (RFC 0012). Its output is
  redacted like a local command's by the ``secrets`` plugin.

Everything else falls through to the local default (``await next()``), so a client without these capabilities
gets the same tools run locally. A client error on fs/* becomes the tool's error (the model sees why).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from dsh._log import get_logger
from dsh.frontends.acp._rpc import RpcError
from dsh.kernel import abortable

if TYPE_CHECKING:
    from dsh.frontends.acp._ports import FrontendPort
    from dsh.kernel import Next
    from dsh.tools import CommandResult, ReadRequest, RunRequest, WriteRequest

__all__ = ["EditorDelegation"]

log = get_logger("dsh.acp")


class EditorDelegation:
    def __init__(self, frontend: FrontendPort) -> None:
        self._frontend = frontend

    def _capability(self, *keys: str) -> bool:
        value: Any = self._frontend.client_capabilities
        for key in keys:
            if not isinstance(value, dict):
                return False
            value = value.get(key)
        return value is True

    def _session_id(self, execution: Any) -> str | None:
        agent = getattr(execution, "agent", None)
        if agent is None:
            return None
        session_id: str = agent.session.id
        return session_id if self._frontend.owns(session_id) else None

    async def read(self, request: ReadRequest, next_: Next[ReadRequest, str]) -> str:
        session_id = self._session_id(request.execution)
        if session_id is None or not self._capability("fs", "readTextFile"):
            return await next_()
        params: dict[str, Any] = {"sessionId": session_id, "path": request.path}
        if request.line is not None:
            params["line"] = request.line
        if request.limit is not None:
            params["limit"] = request.limit
        result = await self._call("fs/read_text_file", params)
        content = result.get("content") if isinstance(result, dict) else None
        if not isinstance(content, str):
            raise OSError(f"the editor did not return the text of {request.path}")
        return content

    async def write(self, request: WriteRequest, next_: Next[WriteRequest, None]) -> None:
        session_id = self._session_id(request.execution)
        if session_id is None or not self._capability("fs", "writeTextFile"):
            return await next_()
        await self._call(
            "fs/write_text_file", {"sessionId": session_id, "path": request.path, "content": request.content}
        )
        return None

    async def run(self, request: RunRequest, next_: Next[RunRequest, CommandResult]) -> CommandResult:
        from dsh.sandbox import active

        session_id = self._session_id(request.execution)
        containment = active()
        if session_id is None or not self._capability("terminal"):
            return await next_()
        program, args = "bash", ["-c", request.command]  # as local commands run: the same command behaves the same
        if containment is not None and containment.level != "off":  # the terminal runs our confining launcher
            program, args = containment.sandbox.terminal_command(containment)
        from dsh.tools import CommandResult

        connection = self._frontend.connection
        created = await self._call(
            "terminal/create",
            {
                "sessionId": session_id,
                "command": program,
                "args": args,
                "cwd": request.cwd,
                "outputByteLimit": request.output_limit,
            },
        )
        terminal_id = created.get("terminalId") if isinstance(created, dict) else None
        if not isinstance(terminal_id, str):
            raise OSError("the editor did not create a terminal")
        ids = {"sessionId": session_id, "terminalId": terminal_id}
        self._frontend.tool_update(
            session_id,
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": request.execution.call_id,
                "content": [{"type": "terminal", "terminalId": terminal_id}],
            },
        )
        exit_status: dict[str, Any] = {}
        timed_out = cancelled = False
        signal = request.execution.signal
        try:
            with anyio.move_on_after(request.timeout) as deadline, abortable(signal):
                answer = await connection.request("terminal/wait_for_exit", ids)
                if isinstance(answer, dict):
                    exit_status.update(answer)
            timed_out = deadline.cancelled_caught
            cancelled = signal is not None and signal.aborted
            if timed_out or cancelled:
                await self._quietly("terminal/kill", ids)
            output = await self._call("terminal/output", ids)
        finally:
            with anyio.CancelScope(shield=True):
                await self._quietly("terminal/release", ids)
        status = output.get("exitStatus") if isinstance(output, dict) else None
        status = status if isinstance(status, dict) else exit_status
        exit_code = status.get("exitCode")
        return CommandResult(
            output=str(output.get("output", "")) if isinstance(output, dict) else "",
            exit_code=exit_code if isinstance(exit_code, int) else None,
            signal=status.get("signal") if isinstance(status.get("signal"), str) else None,
            truncated=bool(output.get("truncated")) if isinstance(output, dict) else False,
            timed_out=timed_out,
            cancelled=cancelled,
            terminal_id=terminal_id,
        )

    async def _call(self, method: str, params: dict[str, Any]) -> Any:
        try:
            return await self._frontend.connection.request(method, params)
        except RpcError as exc:
            raise OSError(f"{method} failed in the editor: {exc.message}") from None

    async def _quietly(self, method: str, params: dict[str, Any]) -> None:
        try:
            await self._frontend.connection.request(method, params, deadline=2.0)
        except RpcError as exc:
            log.warning("terminal request failed", method=method, error=exc.message)
