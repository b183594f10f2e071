"""The tool call pipeline: prepare → decide → ask → apply → budget, one ``tools/execute`` listener for every front end.

Guarantees, for every call of an agent's session:

* **prepare**: a tool with ``prepare`` computes what the call would do; if it cannot apply (no match, ambiguous
  match, bad path, invalid arguments) the call ends with the tool's error and nobody is asked. A refusal that
  holds whatever the call would do (plan mode and an edit or a command) comes first, before anything is matched.
* **decide**: :meth:`SessionPolicy.decide` on the session's mode and rules, with the facts prepare found (paths,
  paths outside the roots, the command). Tools without ``prepare`` are judged on their kind and on the paths of
  their ``meta["paths"]`` (or their card's locations), resolved against the session's roots.
* **ask**: through ``user/approve`` (:func:`dsh.policy.approve`); the options name the scope an "always" answer
  records. An "always" answer becomes a session rule, logged as ``permission/rule``. No answer (cancelled,
  unattended, failed) means the call does not run.
* **apply**: only after allow; paths outside the roots are granted for this one call; ``tool/running`` is logged;
  the chain below gets the :class:`~dsh.services.tools.Prepared` (``ToolExecution.prepared``), so what runs is
  exactly what was approved.
* **budget**: every result leaving the chain is bounded (:mod:`._budget`).

A refused call's result is an error with code ``PERMISSION_DENIED`` and a message the model can act on. A call
without an agent (a direct ``ctx.tools.execute`` in a test) is only budgeted.
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any

from dsh._log import get_logger
from dsh.policy._approval import (
    ALLOW_ALWAYS,
    ALLOW_ONCE,
    REJECT_ALWAYS,
    REJECT_ONCE,
    Approval,
    ApprovalOption,
    approve,
)
from dsh.policy._budget import budget, limit_of
from dsh.policy._rules import RULE_EVENT, RUNNING_EVENT, CallFacts, Decision, SessionPolicy

if TYPE_CHECKING:
    from dsh.kernel import Context, Next
    from dsh.services.tools import Prepared, ToolDefinition, ToolExecution, ToolResult

__all__ = ["REFUSED_CODE", "Pipeline", "refusal_of", "refused"]

REFUSED_CODE = "PERMISSION_DENIED"

log = get_logger("dsh.policy")


def refused(execution: ToolExecution, message: str) -> ToolResult:
    from dsh.services.tools import ToolResult

    return ToolResult(
        execution.call_id,
        [{"type": "text", "text": message}],
        is_error=True,
        error={"name": "PermissionDenied", "code": REFUSED_CODE},
    )


def refusal_of(event_type: str, data: Any) -> str | None:
    """The message of a ``tool/result`` the policy refused (a front end that shows refusals: ``dsh prompt``)."""
    if event_type != "tool/result" or not isinstance(data, dict):
        return None
    error = data.get("error")
    if not isinstance(error, dict) or error.get("code") != REFUSED_CODE:
        return None
    content = data.get("content") or []
    return " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")


class Pipeline:
    def __init__(self, ctx: Context, policies: Any, unattended: str) -> None:
        self._ctx = ctx
        self._policies = policies
        self._unattended = unattended

    async def execute(self, execution: ToolExecution, next_: Next[ToolExecution, ToolResult]) -> ToolResult:
        """``tools/execute``, prepended: the whole pipeline (see the module docstring)."""
        from dsh.services.tools import error_result

        agent = execution.agent
        session_id = agent.session.id if agent is not None else None
        tool = self._ctx.tools.get(execution.name, session_id)
        if agent is None or session_id is None:
            return await self._budget(await next_(), execution, tool)
        prepared: Prepared | None = None
        policy: SessionPolicy = self._policies.session(session_id)
        if tool is not None and tool.prepare is not None:
            early = policy.refusal_before_prepare(self._facts(execution, tool, None))
            if early is not None:
                return refused(execution, early.why)
            try:
                prepared = await tool.prepare(execution.arguments, execution)
            except Exception as exc:  # cannot apply: the tool's error, and nobody is asked
                return error_result(execution.call_id, exc)
        facts = self._facts(execution, tool, prepared)
        decision = policy.decide(facts)
        if decision.verdict == "refuse":
            return refused(execution, decision.why)
        if decision.verdict == "ask":
            message = await self._ask(execution, tool, prepared, facts, decision, policy)
            if message is not None:
                return refused(execution, message)
        if facts.outside:
            from dsh.tools import grant_outside

            for path in facts.outside:
                grant_outside(execution, path)
        agent.session.append(RUNNING_EVENT, {"call_id": execution.call_id})
        if prepared is not None:
            execution = dataclasses.replace(execution, prepared=prepared)
        return await self._budget(await next_(execution), execution, tool)

    async def _budget(self, result: ToolResult, execution: ToolExecution, tool: ToolDefinition | None) -> ToolResult:
        """The budget stage: the tools' output budget (``tool_budget``, :mod:`dsh.tools._budget`: head and tail
        kept, the whole spilled to a file the result names) when the built-in tools are loaded, else the plain
        ceiling of :mod:`._budget`."""
        tool_budget = self._ctx.get("tool_budget")
        if tool_budget is not None:
            budgeted: ToolResult = await tool_budget(result, execution)
            return budgeted
        return budget(result, limit_of(tool))

    # -- facts -------------------------------------------------------------------------------------------------

    def _facts(self, execution: ToolExecution, tool: ToolDefinition | None, prepared: Prepared | None) -> CallFacts:
        """What the decision looks at; an unknown tool (the chain reports it) is judged as kind ``other``."""
        workspace = self._ctx.get("workspace")
        agent = execution.agent
        cwd = workspace.cwd(execution) if workspace is not None else (agent.session.header.cwd if agent else None)
        cwd = cwd or os.getcwd()
        kind = str(tool.meta.get("kind", "other")) if tool is not None else "other"
        asks = bool(tool.meta.get("asks")) if tool is not None else False
        domain_of = tool.meta.get("domain") if tool is not None else None
        domain = None
        if domain_of is not None:  # a network tool: its decisions and "always" answers are per host
            try:
                domain = domain_of(execution.arguments) or None
            except Exception:
                domain = None
        if prepared is not None:
            return CallFacts(
                execution.name, kind, cwd, asks, prepared.paths, prepared.outside, prepared.command, domain
            )
        paths = self._paths(execution, tool, cwd) if tool is not None else []
        outside: list[str] = []
        for path in paths:
            inside = workspace.resolve(execution, path).inside if workspace is not None else _within(path, cwd)
            if not inside:
                outside.append(path)
        return CallFacts(execution.name, kind, cwd, asks, tuple(paths), tuple(outside), domain=domain)

    @staticmethod
    def _paths(execution: ToolExecution, tool: ToolDefinition, cwd: str) -> list[str]:
        """The absolute paths a tool without ``prepare`` would touch: its ``paths`` function, else its card."""
        paths_of = tool.meta.get("paths")
        if paths_of is not None:
            try:
                return [resolved.path for resolved in paths_of(execution.arguments, cwd)]
            except Exception:
                log.warning("tool paths function failed", tool=tool.name)
        present = tool.meta.get("present")
        if present is not None:
            try:
                card = present(execution.arguments, cwd)
            except Exception:
                card = None
            return [path for path, _line in getattr(card, "locations", ()) or ()]
        return []

    # -- ask ---------------------------------------------------------------------------------------------------

    async def _ask(
        self,
        execution: ToolExecution,
        tool: ToolDefinition | None,
        prepared: Prepared | None,
        facts: CallFacts,
        decision: Decision,
        policy: SessionPolicy,
    ) -> str | None:
        """Ask the user; None when the call may run, else the message the model gets."""
        agent = execution.agent
        assert agent is not None
        card = None
        present = tool.meta.get("present") if tool is not None else None
        if present is not None:
            try:
                card = present(execution.arguments, facts.cwd)
            except Exception:
                log.warning("tool presenter failed", tool=execution.name)
        label = _scope_label(execution.name, facts, decision.scopes)
        options = [ApprovalOption(ALLOW_ONCE, "Allow")]
        if decision.always:
            options.append(ApprovalOption(ALLOW_ALWAYS, f"Always allow {label}"))
        options.append(ApprovalOption(REJECT_ONCE, "Reject"))
        if decision.always:
            options.append(ApprovalOption(REJECT_ALWAYS, f"Always reject {label}"))
        approval = Approval(  # a sub-agent asks through its parent's session (``Policies.link``)
            session_id=self._policies.owner(agent.session.id),
            call_id=execution.call_id,
            tool=execution.name,
            kind=facts.kind,
            arguments=execution.arguments,
            options=tuple(options),
            card=card,
            diff=prepared.diff if prepared is not None else None,
            command=facts.command,
            locations=facts.paths,
            reason=decision.why,
            signal=execution.signal,
        )
        verdict = await approve(self._ctx, approval)
        signal = execution.signal
        if signal is not None and signal.aborted:
            return "Cancelled before it ran: the user cancelled the turn."
        choice = verdict.choice
        if choice in (ALLOW_ALWAYS, REJECT_ALWAYS):
            for data in policy.remember(
                execution.name, decision.scopes, "allow" if choice == ALLOW_ALWAYS else "reject"
            ):
                agent.session.append(RULE_EVENT, data)
        if choice in (ALLOW_ONCE, ALLOW_ALWAYS):
            return None
        if choice in (REJECT_ONCE, REJECT_ALWAYS):
            return policy.refusal(execution.name, once=choice == REJECT_ONCE)
        if verdict.reason == "unattended":
            return self._unattended.format(tool=execution.name, why=decision.why)
        return "The permission request was cancelled, so the tool did not run."


def _within(path: str, root: str) -> bool:
    """*path* is *root* or below it, symlinks resolved (:func:`dsh.tools.resolve_path` decides, as for the tools)."""
    from dsh.tools import resolve_path

    return resolve_path(path, root, [root]).inside


def _scope_label(tool: str, facts: CallFacts, scopes: tuple[str, ...]) -> str:
    """How an "always" option names what it covers: ``\\`npm test\\```, ``write_file in \\`src/\\```, the tool."""
    if not scopes:
        return tool
    if facts.domain is not None:
        return f"{tool} for {', '.join(f'`{scope}`' for scope in scopes)}"
    if facts.command is not None:
        return ", ".join(f"`{scope}`" for scope in scopes)
    shown = []
    for scope in scopes:
        relative = os.path.relpath(scope, facts.cwd) if _within(scope, facts.cwd) else scope
        shown.append("`.`" if relative == "." else f"`{relative}/`")
    return f"{tool} in {', '.join(shown)}"
