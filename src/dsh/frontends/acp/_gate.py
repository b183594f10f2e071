"""The ACP side of ``user/approve``: the pipeline's question rendered as ``session/request_permission``.

The policy (modes, rules, what asks) is core (:mod:`dsh.policy`); this desk only asks. Guarantees: the
``tool_call`` card is out before any request (the loop logs the call before executing it); the request's tool
call carries the card (title, kind, locations), the tool's name for a client that knows names, and the prepared diff (for ``write_file`` too: a new file's
content, an overwrite's old and new text); a command is shown whole in the request's content and on one line in
its title, its control and invisible characters escaped (:func:`command_shown`; ``rawInput`` stays the exact
arguments, which JSON escapes anyway); the options are the pipeline's (their names say the scope an
"always" answer records); when the turn is cancelled the client's ``cancelled`` answer is awaited briefly
(``Connection.request_until``), and only a request it leaves unanswered is withdrawn (``$/cancel_request``).
A child's call, for a client that sees child sessions, is asked on the child's session, the child's state on
the parent ``requires_action`` until the answer (RFC 0033).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import anyio

from dsh._log import get_logger
from dsh.frontends.acp._projection import card_fields
from dsh.frontends.acp._rpc import RpcError
from dsh.policy import Approval, Verdict, escape_control

if TYPE_CHECKING:
    from dsh.frontends.acp._ports import FrontendPort
    from dsh.kernel import Next

__all__ = ["ApprovalDesk", "permission_params"]

TITLE_COMMAND = 160
"""A command longer than this (once escaped) is cut in the request's title; its content always has all of it."""

log = get_logger("dsh.acp")
_KINDS = frozenset({"read", "edit", "delete", "move", "search", "execute", "fetch"})


def permission_params(approval: Approval) -> dict[str, Any]:
    """The ``session/request_permission`` params for *approval*."""
    tool_call: dict[str, Any] = {
        "toolCallId": approval.call_id,
        "title": approval.tool,
        "kind": approval.kind if approval.kind in _KINDS else "other",
        "status": "pending",
        "rawInput": approval.arguments,
    }
    if approval.card is not None:
        tool_call.update(card_fields(approval.card))
    if approval.locations and "locations" not in tool_call:
        tool_call["locations"] = [{"path": path} for path in approval.locations]
    if approval.diff is not None:
        path, old, new = approval.diff
        tool_call["content"] = [{"type": "diff", "path": path, "oldText": old, "newText": new}]
    if approval.command is not None:
        tool_call["title"], shown = command_shown(approval.command)
        tool_call.setdefault("content", []).append({"type": "content", "content": {"type": "text", "text": shown}})
    return {
        "sessionId": approval.session_id,
        "toolCall": tool_call,
        "options": [{"optionId": option.id, "name": option.label, "kind": option.id} for option in approval.options],
    }


def command_shown(command: str) -> tuple[str, str]:
    """The title and the text a permission request shows for *command*: control and invisible characters
    escaped (:func:`dsh.policy.escape_control`), so that no editor can display one command while another runs;
    the title on one line (newlines escaped, cut after :data:`TITLE_COMMAND` characters with a note saying so),
    the text whole, in a Markdown code fence longer than any run of backticks in it (so that no Markdown in the
    command can hide part of it)."""
    one_line = escape_control(command, newlines=True)
    title = f"Run {one_line}"
    if len(one_line) > TITLE_COMMAND:
        title = f"Run {one_line[:TITLE_COMMAND]}… ({len(one_line) - TITLE_COMMAND} more characters, shown below)"
    whole = escape_control(command)
    longest = max((len(run) for run in re.findall(r"`+", whole)), default=0)
    fence = "`" * max(3, longest + 1)
    return title, f"{fence}sh\n{whole}\n{fence}"


class ApprovalDesk:
    def __init__(self, frontend: FrontendPort) -> None:
        self._frontend = frontend
        self._asking: dict[str, anyio.Lock] = {}
        """One question at a time per session: the loop runs concurrency-safe calls together (RFC 0018)."""

    async def approve(self, approval: Approval, next_: Next[Approval, Verdict]) -> Verdict:
        """``user/approve`` for this front end's sessions (others go down the chain)."""
        if self._frontend.session_record(approval.session_id) is None:
            return await next_()
        signal = approval.signal
        params = permission_params(approval)
        if self._frontend.features.tool_names:
            params["toolCall"]["name"] = approval.tool
        children = self._frontend.children  # a child the client sees as a session: asked on the child's session
        child = children.child_of_call(approval.session_id, approval.call_id)
        try:
            async with self._asking.setdefault(approval.session_id, anyio.Lock()):  # one question at a time
                if child is not None:
                    params["sessionId"] = child
                    children.state(child, "requires_action")
                try:
                    answered, answer = await self._frontend.connection.request_until(
                        "session/request_permission", params, signal
                    )
                finally:
                    if child is not None:
                        children.state(child, "running")
        except RpcError as exc:
            log.warning("permission request failed", session_id=approval.session_id, error=exc.message)
            return Verdict(reason=f"the editor could not ask: {exc.message}")
        if not answered or (signal is not None and signal.aborted):
            return Verdict(reason="cancelled")
        outcome = answer.get("outcome") if isinstance(answer, dict) else None
        if not isinstance(outcome, dict) or outcome.get("outcome") != "selected":
            return Verdict(reason="cancelled")
        choice = outcome.get("optionId")
        if choice not in {option.id for option in approval.options}:
            return Verdict(reason=f"the editor answered with an unknown option {choice!r}")
        return Verdict(choice=str(choice))
