"""The event catalogue: every event of the harness, its dispatch mode and its typed signature, in one file.

Listen with ``ctx.on(events.AGENT_STATUS, listener)``: mypy checks the listener against the signature here.
Waterfall listeners receive the context arguments, then the value, then ``next`` (see :mod:`dsh.kernel`).

| event                      | mode      | arguments                                   |
|----------------------------|-----------|---------------------------------------------|
| session/created            | emit      | session                                     |
| session/event              | emit      | session, event  (after the push)            |
| session/flush              | parallel  | session  (the durability checkpoint)        |
| session/disposed           | emit      | session  (no longer live: close its files)  |
| session/notice             | emit      | Notice  (a session-level condition, dsh.notices) |
| system-prompt/change       | emit      | —                                           |
| system-prompt/assemble     | waterfall | assembly                                    |
| tools/change               | emit      | —                                           |
| tools/execute              | waterfall | execution → result                          |
| commands/change            | emit      | —                                           |
| user/ask                   | waterfall | Question → Answer                           |
| user/approve               | waterfall | Approval → Verdict  (dsh.policy)            |
| llm/adapter-change         | emit      | —                                           |
| llm/stream                 | waterfall | request → chunk stream                      |
| agent/created, disposed    | emit      | agent                                       |
| agent/status               | emit      | agent, status                               |
| agent/queued               | emit      | agent, content, QueuedInfo                  |
| agent/turn-start           | emit      | agent, turn                                 |
| agent/turn-end             | emit      | agent, turn, reason                         |
| agent/step-start, step-end | emit      | agent, turn, step                           |
| agent/request              | waterfall | agent, turn, step, request                  |
| agent/stream-chunk         | emit      | agent, turn, step, chunk                    |
| agent/step-result          | waterfall | agent, turn, step, message                  |
| agent/turn-continuation    | waterfall | agent, turn, default decision               |
| agent/steering             | emit      | agent, turn, content, source                |
| agent/error                | emit      | agent, turn, step, error                    |
| agent/compact              | waterfall | agent, turn, CompactRequest → data or None  |
| workspace/read             | waterfall | ReadRequest → str                           |
| workspace/write            | waterfall | WriteRequest → None                         |
| workspace/run              | waterfall | RunRequest → CommandResult                  |
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypeAlias, TypedDict

from dsh.kernel import EmitEvent, EventSpec, Next, ParallelEvent, WaterfallEvent

if TYPE_CHECKING:
    from dsh.notices import Notice
    from dsh.policy import Approval, Verdict
    from dsh.questions import Answer, Question
    from dsh.services.agents import Agent, AgentStatus, CompactRequest
    from dsh.services.llm import ContentBlock, GenerateRequest, Message, MessageSource, StreamChunk
    from dsh.services.sessions import Session, SessionEvent
    from dsh.services.system_prompt import PromptAssembly
    from dsh.services.tools import ToolExecution, ToolResult
    from dsh.tools import CommandResult, ReadRequest, RunRequest, WriteRequest


class TurnEndReason(TypedDict):
    """``kind``: completed | aborted (``reason``) | error (``message``, ``code``) | disposed | max-tokens | interrupted."""

    kind: Literal["completed", "aborted", "error", "disposed", "max-tokens", "interrupted"]
    reason: NotRequired[str]
    message: NotRequired[str]
    code: NotRequired[str]


class QueuedInfo(TypedDict):
    source: MessageSource
    steering: bool


# -- sessions -----------------------------------------------------------------------------------------------
SESSION_CREATED: EmitEvent[[Session]] = EmitEvent("session/created")
SESSION_EVENT: EmitEvent[[Session, SessionEvent]] = EmitEvent("session/event")
SESSION_FLUSH: ParallelEvent[[Session]] = ParallelEvent("session/flush")
SESSION_DISPOSED: EmitEvent[[Session]] = EmitEvent("session/disposed")
SESSION_NOTICE: EmitEvent[[Notice]] = EmitEvent("session/notice")
"""A session-level condition (:func:`dsh.notices.post_notice`): front ends show it as their clients can."""

# -- system prompt --------------------------------------------------------------------------------------
SystemPromptAssembleListener: TypeAlias = Callable[
    ["PromptAssembly", Next["PromptAssembly", "PromptAssembly"]], Awaitable["PromptAssembly"]
]
SYSTEM_PROMPT_CHANGE: EmitEvent[[]] = EmitEvent("system-prompt/change")
SYSTEM_PROMPT_ASSEMBLE: WaterfallEvent[SystemPromptAssembleListener, PromptAssembly, PromptAssembly] = WaterfallEvent(
    "system-prompt/assemble"
)

# -- tools ----------------------------------------------------------------------------------------------
ToolsExecuteListener: TypeAlias = Callable[
    ["ToolExecution", Next["ToolExecution", "ToolResult"]], Awaitable["ToolResult"]
]
TOOLS_CHANGE: EmitEvent[[]] = EmitEvent("tools/change")
TOOLS_EXECUTE: WaterfallEvent[ToolsExecuteListener, ToolExecution, ToolResult] = WaterfallEvent("tools/execute")

# -- commands (dsh.commands) and questions to the user (dsh.questions) ---------------------------------------
COMMANDS_CHANGE: EmitEvent[[]] = EmitEvent("commands/change")
UserAskListener: TypeAlias = Callable[["Question", Next["Question", "Answer"]], Awaitable["Answer"]]
USER_ASK: WaterfallEvent[UserAskListener, Question, Answer] = WaterfallEvent("user/ask")
UserApproveListener: TypeAlias = Callable[["Approval", Next["Approval", "Verdict"]], Awaitable["Verdict"]]
USER_APPROVE: WaterfallEvent[UserApproveListener, Approval, Verdict] = WaterfallEvent("user/approve")

# -- llm ------------------------------------------------------------------------------------------------
LlmStreamListener: TypeAlias = Callable[
    ["GenerateRequest", Next["GenerateRequest", "AsyncIterator[StreamChunk]"]],
    Awaitable["AsyncIterator[StreamChunk]"],
]
LLM_ADAPTER_CHANGE: EmitEvent[[]] = EmitEvent("llm/adapter-change")
LLM_STREAM: WaterfallEvent[LlmStreamListener, GenerateRequest, AsyncIterator[StreamChunk]] = WaterfallEvent(
    "llm/stream"
)

# -- agents ---------------------------------------------------------------------------------------------
AgentRequestListener: TypeAlias = Callable[
    ["Agent", int, int, "GenerateRequest", Next["GenerateRequest", "GenerateRequest"]],
    Awaitable["GenerateRequest"],
]
AgentStepResultListener: TypeAlias = Callable[
    ["Agent", int, int, "Message", Next["Message", "Message"]], Awaitable["Message"]
]
AgentCompactListener: TypeAlias = Callable[
    ["Agent", int, "CompactRequest", Next["CompactRequest", "dict[str, Any] | None"]],
    Awaitable["dict[str, Any] | None"],
]
AgentTurnContinuationListener: TypeAlias = Callable[["Agent", int, bool, Next[bool, bool]], Awaitable[bool]]

AGENT_CREATED: EmitEvent[[Agent]] = EmitEvent("agent/created")
AGENT_DISPOSED: EmitEvent[[Agent]] = EmitEvent("agent/disposed")
AGENT_STATUS: EmitEvent[[Agent, AgentStatus]] = EmitEvent("agent/status")
AGENT_QUEUED: EmitEvent[[Agent, list[ContentBlock], QueuedInfo]] = EmitEvent("agent/queued")
AGENT_TURN_START: EmitEvent[[Agent, int]] = EmitEvent("agent/turn-start")
AGENT_TURN_END: EmitEvent[[Agent, int, TurnEndReason]] = EmitEvent("agent/turn-end")
AGENT_STEP_START: EmitEvent[[Agent, int, int]] = EmitEvent("agent/step-start")
AGENT_STEP_END: EmitEvent[[Agent, int, int]] = EmitEvent("agent/step-end")
AGENT_REQUEST: WaterfallEvent[AgentRequestListener, GenerateRequest, GenerateRequest] = WaterfallEvent("agent/request")
AGENT_STREAM_CHUNK: EmitEvent[[Agent, int, int, StreamChunk]] = EmitEvent("agent/stream-chunk")
AGENT_STEP_RESULT: WaterfallEvent[AgentStepResultListener, Message, Message] = WaterfallEvent("agent/step-result")
AGENT_TURN_CONTINUATION: WaterfallEvent[AgentTurnContinuationListener, bool, bool] = WaterfallEvent(
    "agent/turn-continuation"
)
AGENT_STEERING: EmitEvent[[Agent, int, list[ContentBlock], MessageSource]] = EmitEvent("agent/steering")
AGENT_ERROR: EmitEvent[[Agent, int, int, BaseException]] = EmitEvent("agent/error")
AGENT_COMPACT: WaterfallEvent[AgentCompactListener, CompactRequest, dict[str, Any] | None] = WaterfallEvent(
    "agent/compact"
)
"""``agent.compact()``: run between turns, inside a turn of its own (trigger ``compaction``)."""

# -- workspace (dsh.tools): the built-in tools' file and process access, overridable by front ends ----------
WorkspaceReadListener: TypeAlias = Callable[["ReadRequest", Next["ReadRequest", str]], Awaitable[str]]
WorkspaceWriteListener: TypeAlias = Callable[["WriteRequest", Next["WriteRequest", None]], Awaitable[None]]
WorkspaceRunListener: TypeAlias = Callable[
    ["RunRequest", Next["RunRequest", "CommandResult"]], Awaitable["CommandResult"]
]
WORKSPACE_READ: WaterfallEvent[WorkspaceReadListener, ReadRequest, str] = WaterfallEvent("workspace/read")
WORKSPACE_WRITE: WaterfallEvent[WorkspaceWriteListener, WriteRequest, None] = WaterfallEvent("workspace/write")
WORKSPACE_RUN: WaterfallEvent[WorkspaceRunListener, RunRequest, CommandResult] = WaterfallEvent("workspace/run")

ALL: tuple[EventSpec, ...] = tuple(value for value in dict(globals()).values() if isinstance(value, EventSpec))
"""Every declared event spec (for documentation and tests)."""
