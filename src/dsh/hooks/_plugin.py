"""The ``hooks`` plugin: Claude Code's hook events at dsh's seams (RFC 0035).

Guarantees:

* **Where each event fires.** ``SessionStart`` and ``UserPromptSubmit``: before the first model request of a turn
  the user started (``agent/request``, step 1; ``SessionStart`` at the session's first such turn in this process,
  ``source`` ``startup`` or ``resume``). ``PreToolUse``: a step of the pipeline's ``decide`` stage after the
  policy's (the plugin injects ``policy``, so it is registered after it), so the hook sees the prepared call (the
  exact command, the diff) and only calls the policy did not refuse. ``PostToolUse``: the same step, on the
  result coming back from ``apply`` (a call that completed, not an error result). ``Stop`` / ``SubagentStop`` (a
  sub-agent's session): ``agent/turn-continuation`` when the turn would end. ``PreCompact``: ``agent/compact``. ``SessionEnd``: ``agent/disposed`` (in the
  background; :meth:`Hooks.settle` waits for it). ``Notification``: ``user/approve`` and ``user/ask`` (in the
  background, the question is not held up).
* **Answers.** ``PreToolUse``: ``deny`` or exit 2 refuses the call with the reason (stderr) as its result, whatever
  else said allow; ``ask`` makes a call that would run ask first; ``allow`` skips only the mode's default question
  (:func:`dsh.policy.amend_decision`): never a deny rule, plan mode (those refuse before any hook runs), a path
  outside the roots, a rule that asks, or the sandbox. ``PostToolUse``: ``additionalContext`` and a block's reason
  are appended to the result the model gets. ``UserPromptSubmit``: exit 2 or ``decision: block`` ends the turn
  before the model is asked and takes the prompt out of the model's view (``context/rewind``), the reason shown to
  the user; ``additionalContext`` or plain stdout (also ``SessionStart``'s) is a ``<context source="hook">``
  message. ``Stop``: a block with a reason continues the turn with the reason told to the model, at most
  :data:`MAX_STOP_BLOCKS` times a turn.
* **Trust.** Hooks of the user's configuration file run as configured. A project's hooks (and imported Claude
  hooks) run only once the user approved them: the first time one would run in a session's turn, one question
  through ``user/approve`` lists every command (``SessionEnd`` and ``Notification`` never ask: they run a project's
  hooks only when already trusted); "always" is remembered per project root and digest of the hooks
  (:class:`._sources.TrustStore`), "once" for this process; a changed hook asks again. With nobody to ask
  (``dsh exec``) or a refusal, project hooks are skipped for the session, said once.
* **Visible, never wedging.** Every run is a ``hook/run`` session event (``dsh exec --json`` prints it); a tool's
  hooks are also short lines on its card (``display.hooks``), other events' a ``session/notice``. A hook that
  crashes, times out, exits with another status or answers unreadable JSON is one warning notice (shown as a
  message to clients without notices) and is otherwise as if it were not configured; a ``PreToolUse`` hook that
  fails denies nothing. Cancelling the turn kills a running tool or prompt hook.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from dsh import events as ev
from dsh._log import get_logger
from dsh.errors import DshError
from dsh.hooks._config import HookEvent, HooksConfig
from dsh.hooks._run import Answer, run_hook
from dsh.hooks._sources import (
    Hook,
    TrustStore,
    claude_name,
    from_config,
    matches,
    project_digest,
    project_hooks,
    project_root,
)
from dsh.kernel import plugin

if TYPE_CHECKING:
    from dsh.kernel import CancelToken, Context, Next
    from dsh.policy import Approval, Verdict
    from dsh.questions import Answer as QuestionAnswer
    from dsh.questions import Question
    from dsh.services.agents import Agent, CompactRequest
    from dsh.services.llm import GenerateRequest
    from dsh.services.tools import ToolExecution, ToolResult

__all__ = ["HOOK_BLOCKED", "MAX_STOP_BLOCKS", "RUN_EVENT", "HookBlocked", "Hooks", "HooksOptions", "hooks_plugin"]

log = get_logger("dsh.hooks")
RUN_EVENT = "hook/run"
HOOK_BLOCKED = "HOOK_BLOCKED"
MAX_STOP_BLOCKS = 3
TRUST_TOOL = "hooks"
"""The ``tool`` of the trust question (no ``Notification`` hook runs for it)."""


class HookBlocked(DshError):
    default_code = HOOK_BLOCKED


@dataclass(frozen=True, slots=True)
class HooksOptions:
    config: HooksConfig
    source: str = "user"
    """Where the configuration's hooks come from (the file's path, for ``dsh config show``)."""
    data_dir: str | None = None
    """Where approvals of project hooks are kept (None: for this process only)."""


@dataclass(slots=True)
class _Session:
    hooks: list[Hook]
    root: str
    digest: str
    trusted: bool | None = None
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    started: bool = False
    stop_blocks: dict[int, int] = field(default_factory=dict)


class Hooks:
    """The ``hooks`` service: each session's hooks, running them, the trust question."""

    def __init__(self, ctx: Context, options: HooksOptions) -> None:
        self._ctx = ctx
        self.config = options.config
        self.user = from_config(options.config, "user", options.source)
        path = os.path.join(options.data_dir, "hooks", "trusted.json") if options.data_dir else None
        self.trust = TrustStore(path)
        self._sessions: dict[str, _Session] = {}
        self._pending: set[anyio.Event] = set()

    # -- what applies --------------------------------------------------------------------------------------

    def of(self, agent: Agent) -> _Session:
        session_id = agent.session.id
        state = self._sessions.get(session_id)
        if state is None:
            cwd = agent.session.header.cwd or os.getcwd()

            def skipped(path: Path, reason: str) -> None:
                self._notice(session_id, "warning", f"skipped the hooks of {path} ({reason})")

            found = (
                project_hooks(cwd, claude="claude" in self.config.imports, skipped=skipped)
                if self.config.enabled
                else []
            )
            state = _Session(found, project_root(cwd), project_digest(found))
            self._sessions[session_id] = state
        return state

    def configured(self, cwd: str) -> list[Hook]:
        """Every hook a session in *cwd* would have (the user's, then the project's), fresh from disk."""
        if not self.config.enabled:
            return []
        return [*self.user, *project_hooks(cwd, claude="claude" in self.config.imports)]

    def ran_in(self, session_id: str) -> bool:
        """Whether the session's hooks were looked up (it met an event), or the user has hooks of their own."""
        return session_id in self._sessions or bool(self.user)

    def forget(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def has(self, agent: Agent, *events: HookEvent) -> bool:
        """Whether the user or the session's project configured a hook for one of *events* (cheap after the
        session's first call: its project's files are read once)."""
        if not self.config.enabled:
            return False
        if any(h.event in events for h in self.user):
            return True
        return any(h.event in events for h in self.of(agent).hooks)

    async def _select(
        self, agent: Agent, event: HookEvent, *values: str, signal: CancelToken | None, ask: bool = True
    ) -> list[Hook]:
        if not self.config.enabled:
            return []
        chosen = [h for h in self.user if h.event == event and matches(h.matcher, *values)]
        state = self.of(agent)
        project = [h for h in state.hooks if h.event == event and matches(h.matcher, *values)]
        if project and (await self._trusted(agent, state, signal) if ask else self._known_trusted(state)):
            chosen += project
        seen: set[str] = set()  # the same command twice runs once (as Claude Code does)
        return [h for h in chosen if not (h.command in seen or seen.add(h.command))]  # type: ignore[func-returns-value]

    def _known_trusted(self, state: _Session) -> bool:
        """Trusted without asking (already answered in this session, or remembered)."""
        if state.trusted is None and self.trust.trusted(state.root, state.digest):
            state.trusted = True
        return bool(state.trusted)

    async def _trusted(self, agent: Agent, state: _Session, signal: CancelToken | None) -> bool:
        async with state.lock:
            if state.trusted is not None:
                return state.trusted
            if self.trust.trusted(state.root, state.digest):
                state.trusted = True
                return True
            state.trusted = await self._ask_trust(agent, state, signal)
            return state.trusted

    async def _ask_trust(self, agent: Agent, state: _Session, signal: CancelToken | None) -> bool:
        from dsh.policy import ALLOW_ALWAYS, ALLOW_ONCE, REJECT_ONCE, Approval, ApprovalOption, approve
        from dsh.services.tools import ToolCard

        listing = "\n".join(f"{h.event} [{h.matcher or '*'}]: {h.command}  ({h.path})" for h in state.hooks)
        session_id = agent.session.header.parent_session or agent.session.id
        approval = Approval(
            session_id=session_id,
            call_id=f"hooks-trust-{state.digest[:12]}",
            tool=TRUST_TOOL,
            kind="execute",
            arguments={"project": state.root, "hooks": [dataclasses.asdict(h) for h in state.hooks]},
            options=(
                ApprovalOption(ALLOW_ALWAYS, "Run this project's hooks (remember)"),
                ApprovalOption(ALLOW_ONCE, "Run them this time"),
                ApprovalOption(REJECT_ONCE, "Do not run them"),
            ),
            card=ToolCard(title=f"Run the hooks of {state.root}?", kind="execute"),
            command=listing,
            reason="this project configures hooks: commands dsh would run on your machine at its events",
            signal=signal,
        )
        verdict = await approve(self._ctx, approval)
        if verdict.choice in (ALLOW_ALWAYS, ALLOW_ONCE):
            try:
                self.trust.remember(state.root, state.digest, durable=verdict.choice == ALLOW_ALWAYS)
            except OSError as exc:
                log.warning("could not store the approval of hooks", error=str(exc))
            return True
        count = len(state.hooks)
        if verdict.reason == "unattended":
            why = "nobody can approve them here; approve them once in an editor session (dsh acp) or dsh chat"
        elif verdict.choice == REJECT_ONCE:
            why = "you declined them"
        else:
            why = "the question was not answered"
        self._notice(agent.session.id, "warning", f"skipped {count} project hook(s) of {state.root}: {why}")
        return False

    # -- running -------------------------------------------------------------------------------------------

    def _contain(self, agent: Agent) -> Callable[[], contextlib.AbstractContextManager[None]] | None:
        sandbox = self._ctx.get("sandbox")
        if sandbox is None:
            return None
        from dsh.services.tools import ToolExecution

        level = sandbox.approved_level(agent.session.id) if sandbox.support.available else "off"
        cwd = agent.session.header.cwd or os.getcwd()
        execution = ToolExecution("hook", "hook", None, agent)
        workspace = self._ctx.get("workspace")
        roots = tuple(workspace.roots(execution)) if workspace is not None else (cwd,)

        @contextlib.contextmanager
        def contain() -> Iterator[None]:
            with sandbox.contain(execution, level, "hook", roots):
                yield

        return contain

    def payload(self, agent: Agent, event: HookEvent, **fields: Any) -> dict[str, Any]:
        """The JSON a hook reads on stdin (Claude Code's fields, then the event's)."""
        session = agent.session
        policies = self._ctx.get("policy")
        mode = None
        if policies is not None:
            with contextlib.suppress(Exception):
                mode = policies.session(session.id).mode
        return {
            "session_id": session.id,
            "transcript_path": None,
            "cwd": session.header.cwd or os.getcwd(),
            "hook_event_name": event,
            "permission_mode": _claude_mode(mode),
            **fields,
        }

    async def run(
        self,
        agent: Agent,
        event: HookEvent,
        fields: dict[str, Any],
        *values: str,
        signal: CancelToken | None = None,
        call_id: str | None = None,
    ) -> list[Answer]:
        """Run the hooks of *event* whose matcher takes one of *values* (together) and report each run. The trust
        question is asked for the events of a turn; ``SessionEnd`` and ``Notification`` (a session closing, a
        question already on screen) run a project's hooks only when they are trusted already."""
        ask = event not in ("SessionEnd", "Notification")
        hooks = await self._select(agent, event, *values, signal=signal, ask=ask)
        if not hooks:
            return []
        payload = self.payload(agent, event, **fields)
        cwd = agent.session.header.cwd or os.getcwd()
        state = self.of(agent)
        contain = self._contain(agent)
        answers: list[Answer | None] = [None] * len(hooks)

        async def one(index: int, hook: Hook) -> None:
            answers[index] = await run_hook(
                hook, payload, cwd=cwd, project_dir=state.root, signal=signal, contain=contain
            )

        from dsh.secrets import policy_in_force

        # this application's secret policy for the hooks' environment and their redacted output, also for
        # events outside a tool call (RFC 0027 §4f)
        with policy_in_force(self._ctx.get("secret_policy")):
            async with anyio.create_task_group() as group:
                for index, hook in enumerate(hooks):
                    group.start_soon(one, index, hook)
        done = [a for a in answers if a is not None]
        for answer in done:
            self._report(agent, answer, call_id)
        return done

    def _report(self, agent: Agent, answer: Answer, call_id: str | None) -> None:
        data: dict[str, Any] = {
            "hook_event": answer.hook.event,
            "command": answer.hook.command,
            "source": answer.hook.source,
            "exit_code": answer.exit_code,
            "ms": round(answer.ms, 1),
            "line": answer.line(),
        }
        extra = (("call_id", call_id), ("decision", answer.decision), ("problem", answer.problem))
        data.update({key: value for key, value in extra if value is not None})
        if answer.block:
            data["blocked"] = True
        with contextlib.suppress(Exception):  # a disposed session (SessionEnd) takes no more events
            agent.session.append(RUN_EVENT, data)
        session_id = agent.session.id
        if answer.problem is not None:
            self._notice(session_id, "warning", answer.line(), fallback="message")
        elif call_id is None:
            self._notice(session_id, "info", answer.line())
        if answer.system_message:
            self._notice(session_id, "info", f"hook {answer.hook.event}: {answer.system_message}", fallback="message")

    def _notice(self, session_id: str, severity: Any, title: str, *, fallback: Any = "log") -> None:
        from dsh.notices import Notice, post_notice

        post_notice(self._ctx, Notice(session_id, severity, title, source="hooks", fallback=fallback))

    def background(self, work: Callable[[], Any]) -> None:
        """Run *work* (a coroutine function) in the plugin's scope; :meth:`settle` waits for it."""
        done = anyio.Event()
        self._pending.add(done)

        async def runner() -> None:
            try:
                await work()
            finally:
                done.set()
                self._pending.discard(done)

        self._ctx.spawn(runner, name="hooks")

    async def settle(self, within: float = 30.0) -> None:
        """Wait (at most *within* seconds) for the hooks running in the background (``SessionEnd``,
        ``Notification``): ``dsh exec`` calls it before it exits."""
        with anyio.move_on_after(within):
            for done in list(self._pending):
                await done.wait()


def _claude_mode(mode: str | None) -> str:
    return {"accept-edits": "acceptEdits", "bypass": "bypassPermissions", "plan": "plan"}.get(mode or "", "default")


def _texts(blocks: Any) -> str:
    if not isinstance(blocks, list):
        return ""
    return "\n".join(str(b.get("text", "")) for b in blocks if isinstance(b, dict) and b.get("type") == "text")


def _context_message(agent: Agent, text: str, event: str) -> None:
    content = [{"type": "text", "text": text}]
    agent.session.append("context/message", {"content": content, "source": {"kind": "hook", "plugin": event}})


def _tool_input(execution: ToolExecution) -> dict[str, Any]:
    """The call as a Claude Code hook reads it: the arguments, and what prepare found (the exact command, the
    file and the diff) under Claude's keys and under ``dsh``."""
    arguments = execution.arguments if isinstance(execution.arguments, dict) else {"arguments": execution.arguments}
    out: dict[str, Any] = dict(arguments)
    prepared = execution.prepared
    extra: dict[str, Any] = {"tool": execution.name}
    if prepared is not None:
        if prepared.command is not None:
            out["command"] = prepared.command
            extra["command"] = prepared.command
            extra["cwd"] = prepared.cwd
        if prepared.paths:
            out.setdefault("file_path", prepared.paths[0])
            extra["paths"] = list(prepared.paths)
        if prepared.diff is not None:
            path, old, new = prepared.diff
            out["file_path"] = path
            extra["diff"] = {"path": path, "old_text": old, "new_text": new}
    out["dsh"] = extra
    return out


def _refused(execution: ToolExecution, message: str) -> ToolResult:
    """A refusal as the policy's are (code ``PERMISSION_DENIED``: ``dsh exec`` counts it as refused)."""
    from dsh.policy import REFUSED_CODE
    from dsh.services.tools import ToolResult

    return ToolResult(
        execution.call_id,
        [{"type": "text", "text": message}],
        is_error=True,
        error={"name": "PermissionDenied", "code": REFUSED_CODE},
    )


def _told(result: ToolResult, told: list[str]) -> ToolResult:
    """*result* with what hooks tell the model appended (``<context source="hook">`` blocks)."""
    if not told:
        return result
    text = "\n".join(f'<context source="hook">{t}</context>' for t in told)
    return dataclasses.replace(result, content=[*result.content, {"type": "text", "text": text}])


def _with_lines(result: ToolResult, answers: list[Answer]) -> ToolResult:
    if not answers:
        return result
    display = dict(result.display or {})
    display["hooks"] = [*display.get("hooks", []), *(a.line() for a in answers)]
    return dataclasses.replace(result, display=display)


@plugin("hooks", inject=("tools", "policy"))
def hooks_plugin(ctx: Context, options: HooksOptions | None) -> None:
    from dsh.policy import amend_decision

    hooks = Hooks(ctx, options or HooksOptions(HooksConfig()))
    ctx.provide("hooks", hooks)
    if not hooks.config.enabled:
        return

    async def tool_step(execution: ToolExecution, next_: Next[ToolExecution, ToolResult]) -> ToolResult:
        agent = execution.agent
        if agent is None or not hooks.has(agent, "PreToolUse", "PostToolUse"):
            return await next_()
        names = (claude_name(execution.name), execution.name)
        tool_input = _tool_input(execution)
        fields = {"tool_name": names[0], "tool_input": tool_input, "tool_use_id": execution.call_id}
        before = await hooks.run(
            agent, "PreToolUse", fields, *names, signal=execution.signal, call_id=execution.call_id
        )
        denied = [a for a in before if a.block or a.decision == "deny"]
        if denied:
            reason = "; ".join(a.reason or "no reason given" for a in denied)
            return _with_lines(_refused(execution, f"A PreToolUse hook refused this call: {reason}"), before)
        if any(a.decision == "ask" for a in before):
            why = "; ".join(a.reason for a in before if a.decision == "ask" and a.reason) or "a hook asks"
            amend_decision("ask", f"a PreToolUse hook asks: {why}")
        elif (
            before
            and all(a.decision == "allow" for a in before if a.problem is None)
            and any(a.decision == "allow" for a in before)
        ):
            amend_decision("allow", "a PreToolUse hook allowed it")
        contexts = [a.context for a in before if a.context]
        result = await next_()
        if result.is_error:  # PostToolUse is for a call that completed (as in Claude Code): a failure is the result
            return _with_lines(_told(result, contexts), before)
        response = {
            "content": _texts(result.content),
            "is_error": result.is_error,
        }
        from dsh.secrets import redact_json, redact_text

        after = await hooks.run(
            agent,
            "PostToolUse",
            {**fields, "tool_response": redact_json(response, redact_text)},
            *names,
            signal=execution.signal,
            call_id=execution.call_id,
        )
        told = contexts + [a.context for a in after if a.context]
        told += [f"A PostToolUse hook says: {a.reason}" for a in after if a.block]
        return _with_lines(_told(result, told), before + after)

    async def on_request(
        agent: Agent, turn: int, step: int, request: GenerateRequest, next_: Next[GenerateRequest, GenerateRequest]
    ) -> GenerateRequest:
        if step != 1 or not hooks.has(agent, "SessionStart", "UserPromptSubmit"):
            return await next_(request)
        session = agent.session
        opened = session.last("turn/start")
        trigger = opened.data.get("trigger") if opened is not None else None
        source = trigger.get("source") if isinstance(trigger, dict) else None
        if not isinstance(source, dict) or source.get("kind") != "user":
            return await next_(request)
        state = hooks.of(agent)
        told = False
        if not state.started:
            state.started = True
            earlier = any(e.type == "turn/start" and e is not opened for e in session.events_without_chunks())
            how = "resume" if earlier else "startup"
            for answer in await hooks.run(agent, "SessionStart", {"source": how}, how, signal=request.signal):
                if answer.context:
                    _context_message(agent, answer.context, "SessionStart")
                    told = True
        prompt = "\n".join(
            _texts(e.data.get("content"))
            for e in session.events_without_chunks()
            if e.type == "user/message" and opened is not None and e.seq > opened.seq
        )
        answers = await hooks.run(agent, "UserPromptSubmit", {"prompt": prompt}, signal=request.signal)
        blocked = [a for a in answers if a.block]
        if blocked and opened is not None:
            session.append("context/rewind", {"to": opened.seq, "hook": "UserPromptSubmit"})
            reason = "; ".join(a.reason for a in blocked)
            raise HookBlocked(f"A UserPromptSubmit hook blocked the prompt: {reason}")
        for answer in answers:
            if answer.context:
                _context_message(agent, answer.context, "UserPromptSubmit")
                told = True
        if told:
            request = dataclasses.replace(request, messages=session.derive_messages())
        return await next_(request)

    async def on_continue(agent: Agent, turn: int, default: bool, next_: Next[bool, bool]) -> bool:
        decision = await next_(default)
        if decision:
            return decision
        event: HookEvent = "SubagentStop" if agent.session.header.parent_session else "Stop"
        if not hooks.has(agent, event):
            return decision
        state = hooks.of(agent)
        count = state.stop_blocks.get(turn, 0)
        answers = await hooks.run(agent, event, {"stop_hook_active": count > 0})
        blocked = [a for a in answers if a.block]
        if not blocked or count >= MAX_STOP_BLOCKS:
            return decision
        state.stop_blocks[turn] = count + 1
        reason = "; ".join(a.reason for a in blocked)
        _context_message(agent, f"A {event} hook asks you to go on before you stop: {reason}", event)
        return True

    async def on_compact(
        agent: Agent, turn: int, request: CompactRequest, next_: Next[CompactRequest, dict[str, Any] | None]
    ) -> dict[str, Any] | None:
        trigger = "manual"
        fields = {"trigger": trigger, "custom_instructions": request.instructions or ""}
        await hooks.run(agent, "PreCompact", fields, trigger, signal=request.signal)
        return await next_(request)

    def on_disposed(agent: Agent) -> None:
        if not hooks.ran_in(agent.session.id) or not hooks.has(agent, "SessionEnd"):
            hooks.forget(agent.session.id)  # a session that never met its project's hooks ends without them
            return

        async def end() -> None:
            try:
                await hooks.run(agent, "SessionEnd", {"reason": "other"}, "other")
            finally:
                hooks.forget(agent.session.id)

        hooks.background(end)

    def notify(session_id: str, message: str, kind: str) -> None:
        agents = ctx.get("agents")
        agent = next((a for a in agents.list() if a.session.id == session_id), None) if agents is not None else None
        if agent is None or not hooks.has(agent, "Notification"):
            return

        async def run() -> None:
            await hooks.run(agent, "Notification", {"message": message, "notification_type": kind}, kind)

        hooks.background(run)

    async def on_approve(approval: Approval, next_: Next[Approval, Verdict]) -> Verdict:
        if approval.tool != TRUST_TOOL and hooks.config.enabled:
            notify(approval.session_id, f"dsh needs your permission to use {approval.tool}", "permission_prompt")
        return await next_()

    async def on_ask(question: Question, next_: Next[Question, QuestionAnswer]) -> QuestionAnswer:
        notify(question.session_id, f"dsh has a question for you: {question.text[:200]}", "question")
        return await next_()

    ctx.tools.stage("decide", tool_step)
    ctx.on(ev.AGENT_REQUEST, on_request)
    ctx.on(ev.AGENT_TURN_CONTINUATION, on_continue)
    ctx.on(ev.AGENT_COMPACT, on_compact, prepend=True)  # before the compaction plugin, which ends the chain
    ctx.on(ev.AGENT_DISPOSED, on_disposed)
    ctx.on(ev.USER_APPROVE, on_approve, prepend=True)
    ctx.on(ev.USER_ASK, on_ask, prepend=True)
