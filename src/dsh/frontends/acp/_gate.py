"""The permission gate: a ``tools/execute`` listener, prepended, for the ACP front end's own sessions.

It applies the session's mode and "always" rules (:mod:`._permissions`) and asks the user with
``session/request_permission`` when they say so. Guarantees: the ``tool_call`` card is out before any request
(the loop logs the call before executing it); a refused or cancelled call does not run and ends ``failed`` with
a message the model can act on; paths outside the session's directory are granted to the tool for the one call
that was allowed; "always" answers are recorded in the session log (``permission/rule``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Literal

import anyio

from dsh._log import get_logger
from dsh.frontends.acp._permissions import PERMISSION_OPTIONS, RULE_EVENT, RUNNING_EVENT
from dsh.frontends.acp._projection import card_fields
from dsh.frontends.acp._rpc import RpcError
from dsh.kernel import abortable
from dsh.services.tools import ToolExecution, ToolResult

if TYPE_CHECKING:
    from dsh.frontends.acp._frontend import AcpFrontend, _AcpSession
    from dsh.kernel import Next
    from dsh.services.tools import ToolRegistry

__all__ = ["PermissionGate"]

log = get_logger("dsh.acp")


class PermissionGate:
    def __init__(self, frontend: AcpFrontend, tools: ToolRegistry) -> None:
        self._frontend = frontend
        self._tools = tools
        self._asking: dict[str, anyio.Lock] = {}
        """One question at a time per session: concurrent read-only calls may both need the user."""

    async def check(self, execution: ToolExecution, next_: Next[ToolExecution, ToolResult]) -> ToolResult:
        """``tools/execute``, prepended, for this front end's sessions only: apply the session's mode and
        rules, and ask the user (``session/request_permission``) when they say so. The ``tool_call`` card is
        already out (the loop logs the call before executing it). A refused or cancelled call does not run
        and ends ``failed`` with a message the model can act on."""
        agent = execution.agent
        record = self._frontend.session_record(agent.session.id) if agent is not None else None
        if record is None:
            return await next_()
        tool = self._tools.get(execution.name, record.id)
        kind = str(tool.meta.get("kind", "other")) if tool is not None else "other"
        asks = bool(tool.meta.get("asks")) if tool is not None else False
        card = record.present(execution.name, execution.arguments) if record.present is not None else None
        outside = _outside_paths(tool, execution.arguments, card, record.cwd, record.roots)
        decision: str = record.policy.decide(execution.name, kind, outside=bool(outside), asks=asks)
        asked = decision == "ask"
        if asked:
            lock = self._asking.setdefault(record.id, anyio.Lock())
            async with lock:  # decided again once it is our turn: an "always" answer may have just been given
                decision = record.policy.decide(execution.name, kind, outside=bool(outside), asks=asks)
                if decision == "ask":
                    decision = await self._ask(record, execution, card, kind)
        if decision == "cancelled":
            signal = execution.signal
            if signal is not None and signal.aborted:
                return _refused(execution, "Cancelled before it ran: the user cancelled the turn.")
            return _refused(execution, "The permission request was cancelled, so the tool did not run.")
        if decision in ("refuse", "refuse-once"):
            message = record.policy.refusal(
                execution.name, kind, outside=bool(outside), once=decision == "refuse-once", asks=asks
            )
            return _refused(execution, message)
        if outside:
            _grant(execution, outside)
        # The card was "pending" (waiting for the gate, and for the user when asked); it runs now. Logged, so a
        # replay shows the same pending → in_progress → completed as the live stream.
        record.handle.agent.session.append(RUNNING_EVENT, {"call_id": execution.call_id})
        return await next_()

    async def _ask(self, record: _AcpSession, execution: ToolExecution, card: Any, kind: str) -> str:
        """Ask the client; return allow, refuse or cancelled. "Always" answers become session rules, recorded
        in the session log (``permission/rule``) so that a loaded session keeps them."""
        tool_call: dict[str, Any] = {
            "toolCallId": execution.call_id,
            "title": execution.name,
            "kind": kind if kind in ("read", "edit", "delete", "move", "search", "execute", "fetch") else "other",
            "status": "pending",
            "rawInput": execution.arguments,
        }
        if card is not None:
            tool_call.update(card_fields(card))
        params = {
            "sessionId": record.id,
            "toolCall": tool_call,
            "options": [
                {"optionId": option, "name": name.format(tool=execution.name), "kind": option}
                for option, name in PERMISSION_OPTIONS
            ],
        }
        answer: list[Any] = []
        signal = execution.signal
        with abortable(signal):
            try:
                answer.append(await self._frontend.connection.request("session/request_permission", params))
            except RpcError as exc:
                log.warning("permission request failed", session_id=record.id, error=exc.message)
        if signal is not None and signal.aborted:
            return "cancelled"
        outcome = answer[0].get("outcome") if answer and isinstance(answer[0], dict) else None
        if not isinstance(outcome, dict) or outcome.get("outcome") != "selected":
            return "cancelled"
        choice = outcome.get("optionId")
        if choice in ("allow_always", "reject_always"):
            decision: Literal["allow", "reject"] = "allow" if choice == "allow_always" else "reject"
            record.policy.rules[execution.name] = decision
            record.handle.agent.session.append(RULE_EVENT, {"tool": execution.name, "decision": decision})
        if choice in ("allow_once", "allow_always"):
            return "allow"
        return "refuse-once" if choice == "reject_once" else "refuse"


def _refused(execution: ToolExecution, message: str) -> ToolResult:
    return ToolResult(
        execution.call_id,
        [{"type": "text", "text": message}],
        is_error=True,
        error={"name": "PermissionDenied", "code": "PERMISSION_DENIED"},
    )


def _outside_paths(tool: Any, arguments: Any, card: Any, cwd: str, roots: list[str]) -> list[str]:
    """The paths a call would touch outside the session's directory and its additional roots (symlinks
    resolved): from the tool's ``paths`` function when it has one, else from the locations on its card."""
    paths_of = tool.meta.get("paths") if tool is not None else None
    candidates: list[str] | None = None
    if paths_of is not None:
        try:
            candidates = [resolved.path for resolved in paths_of(arguments, cwd) if not resolved.inside]
        except Exception:
            log.warning("tool paths function failed", tool=getattr(tool, "name", "?"))
    if candidates is None:
        candidates = [path for path, _line in getattr(card, "locations", ()) or ()]
    return [path for path in candidates if not _within_any(path, [cwd, *roots])]


def _within_any(path: str, roots: list[str]) -> bool:
    real = os.path.realpath(path)
    for root in roots:
        base = os.path.realpath(root)
        if real == base or real.startswith(base.rstrip(os.sep) + os.sep):
            return True
    return False


def _grant(execution: ToolExecution, paths: list[str]) -> None:
    """Let the tool use paths outside the session's directory for this one call (the user said yes)."""
    from dsh.tools import grant_outside

    for path in paths:
        grant_outside(execution, path)
