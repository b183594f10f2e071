"""The permission policy's stages of the tool call pipeline: ``prepare``, ``decide`` and ``ask`` (the stages
themselves, their order and how other packages join them: :data:`dsh.services.tools.STAGES`, RFC 0027).

Guarantees, for every call of an agent's session:

* **prepare**: a tool with ``prepare`` computes what the call would do (``ToolExecution.prepared`` for every
  stage inside); if it cannot apply (no match, ambiguous match, bad path, invalid arguments) the call ends with
  the tool's error and nobody is asked. A refusal that holds whatever the call would do (plan mode and an edit or
  a command) comes first, before anything is matched.
* **decide**: :meth:`SessionPolicy.decide` on the session's mode and rules, with the facts prepare found (paths,
  paths outside the roots, the command). Tools without ``prepare`` are judged on their kind and on the paths of
  their ``meta["paths"]`` (or their card's locations), resolved against the session's roots. A refused call ends
  here.
* **ask**: through ``user/approve`` (:func:`dsh.policy.approve`) when the verdict asks; the options name the
  scope an "always" answer records. An "always" answer becomes a session rule, logged as ``permission/rule``. No
  answer (cancelled, unattended, failed) means the call does not run. An allowed call (asked or not) is granted
  its paths outside the roots for this one call (revoked when it ends), logged as ``tool/running``, and carries
  ``ToolExecution.decision`` (whether the user was asked) to the stages inside.

A refused call's result is an error with code ``PERMISSION_DENIED`` and a message the model can act on. A call
without an agent (a direct ``ctx.tools.execute`` in a test) passes these stages untouched.
"""

from __future__ import annotations

import contextvars
import dataclasses
import os
from dataclasses import dataclass
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
from dsh.policy._rules import RULE_EVENT, RUNNING_EVENT, CallFacts, Decision, SessionPolicy
from dsh.policy._shell import command_dirs, command_paths, is_read_only, split_command_async

if TYPE_CHECKING:
    from dsh.kernel import Context, Next
    from dsh.services.tools import Prepared, ToolDefinition, ToolExecution, ToolRegistry, ToolResult

__all__ = ["REFUSED_CODE", "Pipeline", "amend_decision", "refusal_of", "refused"]

REFUSED_CODE = "PERMISSION_DENIED"

log = get_logger("dsh.policy")
_INLINE_PATHS = 16
"""A command reading more paths than this has them resolved in a worker thread (each is a few ``lstat`` calls)."""


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


@dataclass(frozen=True, slots=True)
class _Decided:
    """What ``decide`` hands to ``ask`` (this call's task only: a context variable)."""

    facts: CallFacts
    decision: Decision
    policy: SessionPolicy
    allow_label: str = "Allow"
    """The "Allow" option's name (the sandbox names what allowing does when it is the reason for asking)."""


_decided: contextvars.ContextVar[_Decided | None] = contextvars.ContextVar("dsh_policy_decided", default=None)


def amend_decision(verdict: str, why: str) -> bool:
    """A later step of the ``decide`` stage (a ``PreToolUse`` hook, :mod:`dsh.hooks`) amends the policy's verdict on
    the call being decided, before ``ask`` acts on it. ``"ask"`` turns a call that would run without a question
    into one that asks (*why* is the question's reason; no "always" option, so nothing is remembered); ``"allow"``
    skips a question only when it is the mode's default (``Decision.by_default``), never one a rule, a path outside
    the roots, a hazard or the sandbox asked for. A refusal is never amended (a refused call never reaches a later
    step). Returns whether the verdict changed; outside a call the policy decided, nothing happens (False)."""
    decided = _decided.get()
    if decided is None:
        return False
    decision = decided.decision
    if verdict == "ask" and decision.verdict == "allow":
        amended = Decision("ask", why, always=False)
    elif verdict == "allow" and decision.verdict == "ask" and decision.by_default:
        amended = Decision("allow", why)
    else:
        return False
    _decided.set(dataclasses.replace(decided, decision=amended))
    return True


class Pipeline:
    """The policy's three stages (see the module docstring); :meth:`install` adds them to the tools registry."""

    def __init__(self, ctx: Context, policies: Any, unattended: str) -> None:
        self._ctx = ctx
        self._policies = policies
        self._unattended = unattended

    def install(self, tools: ToolRegistry) -> None:
        tools.stage("prepare", self.prepare)
        tools.stage("decide", self.decide)
        tools.stage("ask", self.ask)

    async def prepare(self, execution: ToolExecution, next_: Next[ToolExecution, ToolResult]) -> ToolResult:
        """``prepare``: what the call will do, or the tool's error (nobody is asked)."""
        from dsh.services.tools import error_result

        agent = execution.agent
        if agent is None:
            return await next_()
        tool = self._ctx.tools.get(execution.name, agent.session.id)
        if tool is None or tool.prepare is None:
            return await next_()
        # a refusal that holds whatever the call would do comes before anything is matched (issue 43)
        policy: SessionPolicy = self._policies.session(agent.session.id)
        early = policy.refusal_before_prepare(self._facts(execution, tool, None))
        if early is not None:
            return refused(execution, early.why)
        try:
            prepared = await tool.prepare(execution.arguments, execution)
        except Exception as exc:  # cannot apply: the tool's error, and nobody is asked
            return error_result(execution.call_id, exc)
        return await next_(dataclasses.replace(execution, prepared=prepared))

    async def decide(self, execution: ToolExecution, next_: Next[ToolExecution, ToolResult]) -> ToolResult:
        """``decide``: the session policy's verdict; a refusal ends the call."""
        agent = execution.agent
        if agent is None:
            return await next_()
        session_id = agent.session.id
        tool = self._ctx.tools.get(execution.name, session_id)
        policy: SessionPolicy = self._policies.session(session_id)
        facts = self._facts(execution, tool, execution.prepared)
        if facts.command is not None:
            facts = await self._command_facts(execution, facts, execution.prepared)
        decision = policy.decide(facts)
        decision, allow_label = await self._sandbox_say(execution, facts, decision, policy.mode)
        if decision.verdict == "refuse":
            return refused(execution, decision.why)
        token = _decided.set(_Decided(facts, decision, policy, allow_label))
        try:
            return await next_()
        finally:
            _decided.reset(token)

    async def ask(self, execution: ToolExecution, next_: Next[ToolExecution, ToolResult]) -> ToolResult:
        """``ask``: the user when the verdict asks; then the grants, ``tool/running`` and the call's decision."""
        from dsh.services.tools import CallDecision

        decided = _decided.get()
        agent = execution.agent
        if decided is None or agent is None:
            return await next_()
        _decided.set(None)  # a call the stages below start (a sub-agent's) decides for itself
        facts, decision = decided.facts, decided.decision
        choice: str | None = None
        if decision.verdict == "ask":
            tool = self._ctx.tools.get(execution.name, agent.session.id)
            choice, message = await self._ask(
                execution, tool, execution.prepared, facts, decision, decided.policy, decided.allow_label
            )
            if message is not None:
                return refused(execution, message)
        workspace = self._ctx.get("workspace")
        grants = workspace.grants if workspace is not None else None
        if grants is not None:
            for path in facts.outside:
                grants.grant(execution, path)
        try:
            agent.session.append(RUNNING_EVENT, {"call_id": execution.call_id})
            call = CallDecision(asked=decision.verdict == "ask", choice=choice, why=decision.why)
            return await next_(dataclasses.replace(execution, decision=call))
        finally:
            if grants is not None:
                grants.revoke(execution)

    async def _sandbox_say(
        self, execution: ToolExecution, facts: CallFacts, decision: Decision, mode: str
    ) -> tuple[Decision, str]:
        """The sandbox's say on a command call (:meth:`dsh.sandbox.Sandbox.judge`, which also hands the level to
        the ``contain`` stage): the decision, turned into a question where the sandbox wants one (no sandbox on
        this machine, a command the sandbox stopped before), and the name of the "Allow" option."""
        sandbox = self._ctx.get("sandbox")
        if sandbox is None or facts.command is None or decision.verdict == "refuse":
            return decision, "Allow"
        split = await split_command_async(facts.command)  # cached: the decide stage split it already
        read_only = not split.opaque and all(is_read_only(part) for part in split.commands)
        judgement = sandbox.judge(
            execution, facts.command, asks=decision.verdict == "ask", read_only=read_only, bypass=mode == "bypass"
        )
        if judgement.ask and judgement.why:
            why = f"{decision.why}; {judgement.why}" if decision.verdict == "ask" and decision.why else judgement.why
            decision = Decision("ask", why, decision.scopes, always=False)
        elif not judgement.ask and decision.verdict == "ask":  # the test hook forcing the verdict (FORCE_NO_ASK_ENV)
            decision = Decision("allow")
        return decision, judgement.label or "Allow"

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

    async def _command_facts(self, execution: ToolExecution, facts: CallFacts, prepared: Prepared | None) -> CallFacts:
        """The command split off the event loop (:func:`._shell.split_command_async`), and the paths its read-only
        parts read that lie outside the roots added to ``outside`` (so they ask, as ``read_file`` does)."""
        assert facts.command is not None
        split = await split_command_async(facts.command)
        where = (prepared.cwd if prepared is not None else None) or facts.cwd
        hazard = ""
        if any(part.words[:1] == ("git",) and is_read_only(part) for part in split.commands):
            hazard = _git_lookalike(command_dirs(split, where), facts.cwd)
        paths = command_paths(split, where)
        if not paths:
            return dataclasses.replace(facts, split=split, hazard=hazard)
        workspace = self._ctx.get("workspace")

        def outside_of() -> list[str]:
            if workspace is None:
                return [path for path in paths if not _within(path, facts.cwd)]
            return [path for path in paths if not workspace.resolve(execution, path).inside]

        if len(paths) <= _INLINE_PATHS:
            outside = outside_of()
        else:
            import anyio.to_thread

            outside = await anyio.to_thread.run_sync(outside_of)
        merged = tuple(dict.fromkeys((*facts.outside, *outside)))
        return dataclasses.replace(facts, split=split, outside=merged, hazard=hazard)

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
        allow_label: str = "Allow",
    ) -> tuple[str | None, str | None]:
        """Ask the user: (the option chosen, None) when the call may run, else (None, the message the model
        gets)."""
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
        options = [ApprovalOption(ALLOW_ONCE, allow_label)]
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
            return None, "Cancelled before it ran: the user cancelled the turn."
        choice = verdict.choice
        if choice in (ALLOW_ALWAYS, REJECT_ALWAYS):
            for data in policy.remember(
                execution.name, decision.scopes, "allow" if choice == ALLOW_ALWAYS else "reject"
            ):
                agent.session.append(RULE_EVENT, data)
        if choice in (ALLOW_ONCE, ALLOW_ALWAYS):
            return choice, None
        if choice in (REJECT_ONCE, REJECT_ALWAYS):
            return None, policy.refusal(execution.name, once=choice == REJECT_ONCE)
        if verdict.reason == "unattended":
            return None, self._unattended.format(tool=execution.name, why=decision.why)
        return None, "The permission request was cancelled, so the tool did not run."


def _git_lookalike(dirs: tuple[str, ...], cwd: str) -> str:
    """Why git run in one of *dirs* might read a configuration the model wrote, or "": a directory on the way up
    from where it runs (to the session's directory, or to the file system's root from outside it) that git would
    take for a git directory (it holds a ``HEAD`` file: a bare repository whose ``config`` can name
    ``core.fsmonitor``) or a ``.git`` *file* (it points git at another directory). A real repository's ``.git``
    directory is neither. Edits under ``.git/`` ask (:mod:`._rules`), but these files need no ``.git`` in their
    path."""
    top = os.path.normpath(cwd)
    for start in dirs:
        current = os.path.normpath(start)
        for _ in range(64):
            if os.path.isfile(os.path.join(current, "HEAD")):
                return "git would read a git directory there that is not the repository's own .git (it holds HEAD)"
            if os.path.isfile(os.path.join(current, ".git")):
                return "a .git file there points git at another directory, whose configuration can run programs"
            parent = os.path.dirname(current)
            if current == top or parent == current:
                break
            current = parent
    return ""


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
