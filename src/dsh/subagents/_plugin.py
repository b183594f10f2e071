"""The ``subagents`` plugin: the ``task`` tool, the children it runs, their limits and their progress.

Guarantees:

* A ``task`` call creates a child agent through ``ctx.agents.create`` on a session of its own whose header names
  the parent session and the ``task`` call (``parent_session``, ``parent_call``); the child's final message is
  the call's result (budgeted by the pipeline like any result). A child that fails or is cancelled is the call's
  error result, never the parent turn's failure.
* The child uses its parent's policy (``Policies.link``): the parent's mode and rules, its asks go to the user
  through the parent's session. A type's allow-list is enforced before the pipeline: a tool outside it (or a
  command that is not read-only for ``explore``) is refused without anyone being asked, and is not offered.
* Depth limit 1: a child is never offered ``task`` and its ``task`` calls are refused.
* Cancelling the parent's turn cancels every running child (the parent's cancel token); the child is disposed
  before the call returns, whatever happened (shielded from cancellation), so no child outlives its call.
* ``task`` is concurrency-safe (RFC 0018): several calls of one step run side by side, at most
  ``max_concurrent`` children at a time; the loop logs their results in call order.
* The child's tool call events (call, running, result with its text cut to 2,000 characters) are copied to the
  parent's log as ``subagent/event``; the ACP projection shows them as cards of their own whose ``_meta`` names the
  parent call (``<child session>/<call id>`` as their id, so they never collide with the parent's).
* Each of the child's ``usage`` events is copied to the parent's log as ``subagent/usage`` (with the child's model):
  the context plugin adds its cost to the parent's (never its tokens: they are not in the parent's context).
* Progress: each tool call and each message of a child appends a ``tool/progress`` event to the parent's session
  for the ``task`` call (running count, the latest tool titles, the tail of its text); front ends show it on
  the call's card (ACP: ``tool_call_update`` content).
* The parent's log brackets each child: ``subagent/start`` (child session, parent call, type, description, prompt,
  model) is appended before the child's session exists, so it precedes everything the child logs, and
  ``subagent/end`` (state completed | failed | cancelled, ``stop_reason`` end_turn | max_tokens | cancelled when the
  child's turn ended that way, ``report`` its final text when it finished) after the child was disposed. Front ends
  that show child sessions natively (ACP ``subagents``) announce and close the child from them, live and on load.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import BaseModel, ConfigDict, Field

from dsh import events as ev
from dsh._log import get_logger
from dsh.errors import DshError, ToolArgsError
from dsh.kernel import AbortedError, plugin
from dsh.services.sessions import ignores_text_chunks
from dsh.subagents._types import BUILTIN_TYPES, DEFAULT_TYPE, AgentType

if TYPE_CHECKING:
    from dsh.kernel import Context, Next
    from dsh.policy import ShellSplit
    from dsh.services.agents import Agent
    from dsh.services.sessions import Session, SessionEvent
    from dsh.services.system_prompt import PromptAssembly
    from dsh.services.tools import ToolExecution, ToolResult

__all__ = [
    "END_EVENT",
    "MIRROR_EVENT",
    "PROGRESS_EVENT",
    "START_EVENT",
    "TASK_TOOL",
    "Child",
    "Subagents",
    "SubagentsConfig",
    "subagents_plugin",
]

log = get_logger("dsh.subagents")

TASK_TOOL = "task"
PROGRESS_EVENT = "tool/progress"
MIRROR_EVENT = "subagent/event"
USAGE_EVENT = "subagent/usage"
START_EVENT = "subagent/start"
END_EVENT = "subagent/end"
_STOP_REASONS = {"completed": "end_turn", "max-tokens": "max_tokens", "aborted": "cancelled", "disposed": "cancelled"}
_MIRRORED = ("tool/call", "tool/running", "tool/result")
_MIRRORED_TEXT = 2000
_TAIL = 300
_TITLES = 3


class SubagentsConfig(BaseModel):
    """``max_concurrent``: children running at once (more wait their turn); ``model``: the children's default
    model (None: the parent's)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)
    max_concurrent: int = Field(default=4, ge=1)
    model: str | None = None


class TaskArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")
    description: str = Field(min_length=1, description="A short (3-5 words) description of the job.")
    prompt: str = Field(min_length=1, description="The job, complete: the sub-agent sees nothing else.")
    agent: str | None = Field(default=None, description="The agent type (default explore).")


@dataclass(slots=True)
class Child:
    """A running or finished child: which call started it, its type, its state and what it did so far."""

    session_id: str
    parent_session: str
    parent_call: str
    type: AgentType
    description: str
    model: str | None = None
    state: str = "running"
    calls: int = 0
    titles: list[str] = field(default_factory=list)
    tail: str = ""


class Subagents:
    """``ctx.subagents``: the children of every session (running and finished, while the daemon runs)."""

    def __init__(self, ctx: Context, config: SubagentsConfig, types: dict[str, AgentType]) -> None:
        self._ctx = ctx
        self._config = config
        self.types = types
        self.children: dict[str, Child] = {}
        self._limit = anyio.Semaphore(config.max_concurrent)

    def of(self, parent_session: str) -> list[Child]:
        return [child for child in self.children.values() if child.parent_session == parent_session]

    def types_for(self, cwd: str | None) -> dict[str, AgentType]:
        """The types a session in *cwd* offers: the built-ins and the agent files (:mod:`._files`)."""
        from dsh.subagents._files import agent_types

        return agent_types(cwd)

    def description(self, types: dict[str, AgentType] | None = None) -> str:
        """The ``task`` tool's description: when to use it, and every type the session offers."""
        types = self.types if types is None else types
        kinds = "\n".join(f"- {t.name}: {t.description}" for t in types.values())
        return (
            "Start a sub-agent for a bounded, self-contained job (an independent search, an investigation); it "
            "works in its own context and returns a short report, so yours stays small. Several task calls in "
            "one step run side by side. Give it a complete prompt: it sees nothing of this conversation. "
            f"Agent types (default {DEFAULT_TYPE}):\n{kinds}"
        )

    # -- the tool --------------------------------------------------------------------------------------

    async def run(self, args: TaskArguments, execution: ToolExecution) -> str:
        parent = execution.agent
        if parent is None:
            raise DshError("task needs an agent: it runs a sub-agent of the calling session", "NO_AGENT")
        if parent.session.id in self.children:
            raise DshError("a sub-agent cannot start sub-agents (depth limit 1); do the work yourself", "DEPTH")
        types = self.types_for(parent.session.header.cwd)
        kind = types.get(args.agent or DEFAULT_TYPE)
        if kind is None:
            raise ToolArgsError(f"unknown agent type {args.agent!r}; choose one of {', '.join(types)}")
        async with self._limit:
            return await self._run(parent, kind, args, execution)

    async def _run(self, parent: Agent, kind: AgentType, args: TaskArguments, execution: ToolExecution) -> str:
        from dsh.services.agents import AgentOptions

        ctx = self._ctx
        session_id = f"task-{uuid.uuid4()}"
        child = Child(session_id, parent.session.id, execution.call_id, kind, args.description)
        meta: dict[str, Any] = {"parent_session": parent.session.id, "parent_call": execution.call_id}
        if parent.session.header.cwd is not None:
            meta["cwd"] = parent.session.header.cwd
        policies = ctx.get("policy")
        unlink = policies.link(session_id, parent.session.id) if policies is not None else None
        self.children[session_id] = child
        model = kind.model or self._config.model or parent.options.model
        child.model = model
        signal = execution.signal
        handle = None
        report: str | None = None
        announced = False
        try:
            if signal is not None:
                signal.raise_if_aborted()
            parent.session.append(
                START_EVENT,
                {
                    "session_id": session_id,
                    "parent_call": execution.call_id,
                    "agent_type": kind.name,
                    "description": args.description,
                    "prompt": args.prompt,
                    "model": model,
                },
            )
            announced = True
            handle = await ctx.agents.create(
                agent_id=f"agent-{session_id}",
                session_id=session_id,
                meta=meta,
                agent_options=AgentOptions(model=model, system_prompt=kind.instructions),
            )
            agent = handle.agent
            remove = signal.add_callback(lambda reason: agent.cancel()) if signal is not None else None
            try:
                agent.send([{"type": "text", "text": args.prompt}])
                await agent.when_idle()
            finally:
                if remove is not None:
                    remove()
            if signal is not None and signal.aborted:
                child.state = "cancelled"
                raise AbortedError(signal.reason or "cancelled")
            report = self._answer(agent.session, child)
            return report
        except BaseException:
            if child.state == "running":
                child.state = "failed"
            raise
        finally:
            with anyio.CancelScope(shield=True):
                if handle is not None:
                    await handle.dispose()
            if unlink is not None:
                unlink()
            if announced:
                self._ended(parent, child, handle, report)

    @staticmethod
    def _ended(parent: Agent, child: Child, handle: Any, report: str | None) -> None:
        """``subagent/end`` on the parent's log, for a child whose ``subagent/start`` was logged."""
        end: dict[str, Any] = {"session_id": child.session_id, "parent_call": child.parent_call, "state": child.state}
        last = handle.agent.session.last("turn/end") if handle is not None else None
        kind = last.data.get("reason", {}).get("kind") if last is not None else None
        if child.state == "cancelled":
            end["stop_reason"] = "cancelled"
        elif kind in _STOP_REASONS:
            end["stop_reason"] = _STOP_REASONS[kind]
        if report is not None:
            end["report"] = report
        parent.session.append(END_EVENT, end)

    @staticmethod
    def _answer(session: Session, child: Child) -> str:
        end = session.last("turn/end")
        reason = end.data.get("reason", {}) if end is not None else {"kind": "error", "message": "no turn ran"}
        if reason.get("kind") not in ("completed", "max-tokens"):
            child.state = "failed"
            why = reason.get("message") or reason.get("reason") or reason.get("kind")
            raise DshError(f"the sub-agent did not finish: {why}", "SUBAGENT_FAILED")
        message = session.last("assistant/message")
        text = ""
        if message is not None:
            text = "".join(b.get("text", "") for b in message.data.get("content", []) if b.get("type") == "text")
        child.state = "completed"
        return text.strip() or "(the sub-agent finished without a report)"

    # -- limits ----------------------------------------------------------------------------------------

    def refusal(self, execution: ToolExecution, split: ShellSplit | None = None) -> str | None:
        """Why a child's call is outside its type (None: it may go on to the pipeline); *split*: the command already
        split (off the event loop, :func:`dsh.policy.split_command_async`)."""
        agent = execution.agent
        child = self.children.get(agent.session.id) if agent is not None else None
        if child is None:
            return None
        name = execution.name
        if name == TASK_TOOL:
            return "A sub-agent cannot start sub-agents (depth limit 1). It did not run."
        if not child.type.allows(name):
            return f"{name} is not available to a {child.type.name} sub-agent. It did not run."
        if name == "run_command" and child.type.read_only_commands:
            command = execution.arguments.get("command") if isinstance(execution.arguments, dict) else None
            if not isinstance(command, str) or not _read_only(command, split):
                return f"A {child.type.name} sub-agent runs only read-only commands. It did not run."
        return None

    def offered(self, session_id: str, tool: str) -> bool:
        child = self.children.get(session_id)
        return child is None or (tool != TASK_TOOL and child.type.allows(tool))

    # -- progress --------------------------------------------------------------------------------------

    @ignores_text_chunks  # nothing to do for a streamed chunk: keep the chunk path free (RFC 0007)
    def progress(self, session: Session, event: SessionEvent) -> None:
        child = self.children.get(session.id)
        if child is None or child.state != "running":
            return
        if event.type in _MIRRORED:
            self._mirror(child, event)
        if event.type == "usage":  # the child's cost is the parent's (the context plugin adds it up)
            parent = self._parent_session(child)
            if parent is not None:
                parent.append(
                    USAGE_EVENT,
                    {
                        "parent_call": child.parent_call,
                        "session_id": child.session_id,
                        "model": child.model,
                        "usage": event.data.get("usage"),
                    },
                )
            return
        if event.type == "tool/call":
            child.calls += 1
            child.titles = [*child.titles, str(event.data.get("name", "tool"))][-_TITLES:]
        elif event.type == "assistant/message":
            text = "".join(
                b.get("text", "")
                for b in event.data.get("content", [])
                if isinstance(b, dict) and b.get("type") == "text"
            ).strip()
            if not text:
                return
            child.tail = text[-_TAIL:]
        else:
            return
        parent = self._parent_session(child)
        if parent is None:
            return
        lines = [f"{child.type.name}: {child.description} — {child.calls} tool call{'s' if child.calls != 1 else ''}"]
        lines += [f"· {title}" for title in child.titles]
        if child.tail:
            lines.append(child.tail)
        parent.append(
            PROGRESS_EVENT,
            {
                "call_id": child.parent_call,
                "content": [{"type": "text", "text": "\n".join(lines)}],
                "meta": {"dsh": {"subagentSessionId": child.session_id, "parentToolCallId": child.parent_call}},
            },
        )

    def _mirror(self, child: Child, event: SessionEvent) -> None:
        """The child's tool call events, copied to the parent's log as ``subagent/event`` (a result's text cut to
        :data:`_MIRRORED_TEXT`): front ends show them as the child's own cards, tagged with the parent call."""
        parent = self._parent_session(child)
        if parent is None:
            return
        data = dict(event.data)
        if event.type == "tool/result":
            text = "".join(b.get("text", "") for b in data.get("content", []) if isinstance(b, dict))
            cut = text if len(text) <= _MIRRORED_TEXT else text[:_MIRRORED_TEXT] + " […]"
            data = {key: data[key] for key in ("call_id", "is_error", "error") if key in data}
            data["content"] = [{"type": "text", "text": cut}]
        parent.append(
            MIRROR_EVENT,
            {"parent_call": child.parent_call, "session_id": child.session_id, "type": event.type, "data": data},
        )

    def _parent_session(self, child: Child) -> Session | None:
        for agent in self._ctx.agents.list():
            if agent.session.id == child.parent_session:
                session: Session = agent.session
                return session
        return None


def _read_only(command: str, split: ShellSplit | None = None) -> bool:
    from dsh.policy import is_read_only, split_command

    split = split if split is not None else split_command(command)
    return not split.opaque and all(is_read_only(simple) for simple in split.commands)


def _refused(execution: ToolExecution, message: str) -> ToolResult:
    from dsh.policy import REFUSED_CODE
    from dsh.services.tools import ToolResult

    return ToolResult(
        execution.call_id,
        [{"type": "text", "text": message}],
        is_error=True,
        error={"name": "PermissionDenied", "code": REFUSED_CODE},
    )


@plugin("subagents", inject=("tools", "agents"), config=SubagentsConfig)
def subagents_plugin(ctx: Context, config: SubagentsConfig | None) -> None:
    """Provide ``subagents`` and register ``task``; load it after ``policy`` so its limits run first."""
    from dsh.services.tools import ToolCard, define_tool

    subagents = Subagents(ctx, config or SubagentsConfig(), dict(BUILTIN_TYPES))
    ctx.provide("subagents", subagents)
    tool = define_tool(TASK_TOOL, subagents.description(), TaskArguments, subagents.run)

    def present(arguments: Any, cwd: str) -> ToolCard:
        what = arguments.get("description") if isinstance(arguments, dict) else None
        kind = arguments.get("agent") if isinstance(arguments, dict) else None
        return ToolCard(title=f"{kind or DEFAULT_TYPE}: {what or 'sub-agent'}", kind="think")

    ctx.tools.register(
        type(tool)(
            tool.name,
            tool.description,
            tool.parameters,
            tool.execute,
            tool.strict,
            meta={"kind": "think", "present": present, "concurrency_safe": True},
        )
    )

    async def limits(execution: ToolExecution, next_: Next[ToolExecution, ToolResult]) -> ToolResult:
        split = None
        arguments = execution.arguments
        if (
            execution.name == "run_command"
            and isinstance(arguments, dict)
            and isinstance(arguments.get("command"), str)
        ):
            from dsh.policy import split_command_async

            split = await split_command_async(arguments["command"])  # a long line never holds the event loop
        why = subagents.refusal(execution, split)
        if why is not None:
            return _refused(execution, why)
        return await next_()

    async def offered(assembly: PromptAssembly, next_: Next[PromptAssembly, PromptAssembly]) -> PromptAssembly:
        agent = assembly.agent
        if agent is not None and agent.session.id in subagents.children:
            sid = agent.session.id
            assembly.tools = [schema for schema in assembly.tools if subagents.offered(sid, schema["name"])]
        elif agent is not None and any(schema["name"] == TASK_TOOL for schema in assembly.tools):
            described = subagents.description(subagents.types_for(agent.session.header.cwd))
            assembly.tools = [
                {**schema, "description": described}
                if schema["name"] == TASK_TOOL and schema["description"] != described
                else schema
                for schema in assembly.tools
            ]
        return await next_(assembly)

    def forget(agent: Agent) -> None:  # a parent gone: its finished children are no longer listed
        for child in subagents.of(agent.session.id):
            if child.state != "running":
                subagents.children.pop(child.session_id, None)

    ctx.tools.stage("limits", limits)
    ctx.on(ev.SYSTEM_PROMPT_ASSEMBLE, offered, prepend=True)
    ctx.on(ev.SESSION_EVENT, subagents.progress)
    ctx.on(ev.AGENT_DISPOSED, forget)
    ctx.plugin(_agents_command, subagents)


@plugin("subagents.command", inject=("commands",))
def _agents_command(ctx: Context, subagents: Subagents) -> None:
    """``/agents``: the session's children (while the daemon runs), running and finished, with their state."""
    from dsh.commands import CommandResult, Invocation

    async def agents(invocation: Invocation) -> CommandResult:
        children = subagents.of(invocation.agent.session.id)
        if not children:
            return CommandResult(text="No sub-agents in this session.")
        lines = ["Sub-agents:"]
        for child in children:
            calls = f"{child.calls} tool call{'s' if child.calls != 1 else ''}"
            lines.append(f"- {child.type.name}: {child.description} — {child.state}, {calls} ({child.session_id})")
        return CommandResult(text="\n".join(lines))

    ctx.commands.register("agents", "List this session's sub-agents (task) and their state.", agents)
