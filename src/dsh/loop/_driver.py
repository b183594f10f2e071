"""The loop driver: one long-lived task per agent that turns queued prompts into turns, steps and tool calls.

This is the only place in dsh with loop logic. The order of appends and emits below is the contract (seeds,
reference §3.2-§3.4); every other behaviour is a plugin on a seam:

* ``agent/request`` (rewrite the model call), ``agent/step-result`` (rewrite what the model said before it is
  logged and run), ``tools/execute`` (gate or replace a tool call), ``agent/turn-continuation`` (decide whether
  the turn goes on), ``session/event`` and ``session/flush`` (persistence), ``agent/*`` (observation).

Error containment: a throwing plugin ends the *turn*, never the loop; a failed turn has exactly one ``error``
event and one ``agent/error``; nothing the loop writes lands after the turn's ``turn/end``. Reason precedence:
disposed > aborted > error > max-tokens (sticky within a turn) > completed. See
``rfcs/0002-loop-and-cancellation.md`` for the cancellation windows and the races they close.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from dsh import events as ev
from dsh._jsonlimits import MAX_JSON_DEPTH, exceeds_depth, text_may_exceed
from dsh._log import bind_context, get_logger
from dsh.errors import DshError, ToolArgsError, as_exception, error_code, error_message, is_control_flow
from dsh.events import TurnEndReason
from dsh.kernel import AbortedError, CancelToken
from dsh.loop._state import LoopState, last_turn_number, turn_is_open
from dsh.services.agents import CompactRequest
from dsh.services.llm import (
    BlockAssembler,
    ContentBlock,
    FinishReason,
    GenerateRequest,
    Message,
    MessageSource,
    ToolCallBlock,
)
from dsh.services.sessions import parse_json
from dsh.services.system_prompt import render_prompt
from dsh.services.tools import ToolExecution, ToolResult, error_result

if TYPE_CHECKING:
    from dsh.loop._agent import ReactLoopAgent
    from dsh.loop._inbox import InboxMessage

__all__ = ["Turn", "close_stuck_turn", "compact", "inject", "run_loop"]

log = get_logger("dsh.loop")

_FAIRNESS = 128
"""Yield to the event loop at least every this many chunks: an adapter that never awaits (echo, a replay)
must not starve the rest of the process (the protocol reader that brings ``session/cancel``, the writer).
128 chunks is well under a millisecond of work, and the writers then make one system call per 128 frames
and lines (32 cost 9 % more instructions per chunk, 256 filled the protocol writer's frame bound every
turn of the loop; RFC 0007)."""


def _emit_error(loop: LoopState, turn: int, step: int, error: BaseException) -> None:
    agent = loop.agent
    try:
        loop.ctx.emit(ev.AGENT_ERROR, agent, turn, step, error)
    except Exception:
        log.exception("agent/error listener failed", agent_id=agent.id)


async def run_loop(loop: LoopState) -> None:
    """Drive *loop*'s agent until it is disposed (reference §3.2)."""
    agent, inbox = loop.agent, loop.inbox
    try:
        while not agent.is_disposed:
            await inbox.wait_for_queued(loop.disposed)
            if agent.is_disposed:
                break
            # Window 1: a cancel that landed while we were waking up drops the turn before it starts.
            if loop.cancel_requested:
                loop.cancel_requested = False
                if not inbox.has_queued:
                    loop.settle_idle()
                    continue
            loop.set_status("running")
            if agent.is_disposed:
                break
            # Window 2: an agent/status("running") listener may have cancelled (and maybe queued anew).
            if loop.cancel_requested:
                loop.cancel_requested = False
                if not inbox.has_queued:
                    loop.set_status("idle")
                    continue
            turn = last_turn_number(agent.session) + 1
            try:
                lock = loop.turn_lock
                if lock.locked():  # a compaction in progress finishes first
                    await lock.acquire()
                else:
                    lock.acquire_nowait()  # no extra scheduling point on the common path
                try:
                    turn = last_turn_number(agent.session) + 1
                    with bind_context(session_id=agent.session.id, turn=turn):
                        await _run_turn(loop, turn)
                finally:
                    lock.release()
            except BaseException as raw:
                if is_control_flow(raw):
                    raise
                pre_turn = as_exception(raw)
                log.warning("turn failed before it opened", agent_id=agent.id, turn=turn, error=error_message(pre_turn))
                _emit_error(loop, turn, 0, pre_turn)
            loop.cancel_requested = False
            for message in inbox.drain_steering():
                inbox.enqueue(message)
            if not inbox.has_queued:
                loop.set_status("idle")
    finally:
        loop.done.set()


@dataclass(slots=True)
class _StepOutcome:
    had_tool_calls: bool
    finish: FinishReason | None


class Turn:
    """The bookkeeping of one turn: its reason, the open step, and the closers that keep it balanced."""

    __slots__ = (
        "agent",
        "ctx",
        "error_reported",
        "loop",
        "open_calls",
        "reason",
        "step",
        "step_open",
        "turn",
        "turn_ended",
    )

    def __init__(self, loop: LoopState, turn: int) -> None:
        self.loop = loop
        self.agent: ReactLoopAgent = loop.agent
        self.ctx = loop.ctx
        self.turn = turn
        self.step = 0
        self.reason: TurnEndReason = {"kind": "completed"}
        self.step_open = False
        self.turn_ended = False
        self.error_reported = False
        self.open_calls: list[str] = []
        """The call ids of tool calls logged without their results yet, in call order."""

    def fail(self, error: BaseException) -> None:
        """Record the turn's error once: one ``error`` event, one ``agent/error``."""
        if self.error_reported:
            return
        self.error_reported = True
        agent = self.agent
        message, code = error_message(error), error_code(error)
        if not self.turn_ended:
            reason: TurnEndReason = {"kind": "error", "message": message}
            data: dict[str, Any] = {"turn": self.turn, "step": self.step, "message": message}
            if code is not None:
                reason["code"] = code
                data["code"] = code
            self.reason = reason
            try:
                agent.session.append("error", data)
            except Exception:
                log.exception("session/event listener failed on error", agent_id=agent.id)
        else:
            log.warning("error after turn/end", agent_id=agent.id, turn=self.turn, error=message)
        _emit_error(self.loop, self.turn, self.step, error)

    def close_step(self) -> bool:
        """Append ``step/end`` and emit ``agent/step-end``; a failure fails the turn (returns False)."""
        if not self.step_open:
            return True
        self.step_open = False
        agent = self.agent
        try:
            agent.session.append("step/end", {"turn": self.turn, "step": self.step})
            self.ctx.emit(ev.AGENT_STEP_END, agent, self.turn, self.step)
        except BaseException as error:
            if is_control_flow(error):
                raise
            self.fail(as_exception(error))
            return False
        return True

    def close_turn(self, *, emit: bool) -> None:
        if self.turn_ended:
            return
        self.turn_ended = True
        agent = self.agent
        try:
            agent.session.append("turn/end", {"turn": self.turn, "reason": self.reason})
        except Exception:
            log.exception("session/event listener failed on turn/end", agent_id=agent.id)
        if emit:
            self.ctx.emit(ev.AGENT_TURN_END, agent, self.turn, self.reason)

    def drain_steering(self) -> bool:
        agent = self.agent
        steered = agent.inbox.drain_steering()
        for message in steered:
            agent.session.append(
                "steering/message", {"turn": self.turn, "content": message.content, "source": message.source}
            )
            self.ctx.emit(ev.AGENT_STEERING, agent, self.turn, message.content, message.source)
        return bool(steered)


def _aborted(reason: str) -> TurnEndReason:
    return {"kind": "aborted", "reason": reason}


async def _run_turn(loop: LoopState, turn_number: int) -> None:
    """One turn (reference §3.3); raises only when the turn never opened."""
    queued: list[InboxMessage] = loop.inbox.drain_queued()
    if not queued:
        return
    agent, ctx, session = loop.agent, loop.ctx, loop.session
    turn = loop.turn = Turn(loop, turn_number)
    saved = True
    try:
        session.append("turn/start", {"turn": turn_number, "trigger": {"kind": "message", "source": queued[0].source}})
        for message in queued:
            session.append("user/message", {"content": message.content, "source": message.source})
        ctx.emit(ev.AGENT_TURN_START, agent, turn_number)
        while True:
            turn.step += 1
            step = turn.step
            turn.drain_steering()
            turn.step_open = True  # before the append: a throwing listener leaves the event in the log
            session.append("step/start", {"turn": turn_number, "step": step})
            ctx.emit(ev.AGENT_STEP_START, agent, turn_number, step)
            signal = CancelToken()
            loop.current_abort = signal
            if loop.cancel_requested:  # the step-start window
                loop.current_abort = None
                turn.reason = _aborted(loop.cancel_reason)
                turn.close_step()
                break
            step_error: Exception | None = None
            try:
                outcome = await _run_step(loop, turn, signal)
            except BaseException as error:
                if is_control_flow(error):
                    raise
                step_error = as_exception(error)
            finally:
                loop.current_abort = None
            if step_error is not None:
                turn.close_step()
                if agent.is_disposed:
                    turn.reason = {"kind": "disposed"}
                elif signal.aborted:
                    turn.reason = _aborted(signal.reason or "aborted")
                else:
                    turn.fail(step_error)
                break
            if outcome.finish is not None and outcome.finish["kind"] == "max-tokens":
                turn.reason = {"kind": "max-tokens"}
            steered = turn.drain_steering()
            if not turn.close_step():
                break
            default = outcome.had_tool_calls or steered
            try:
                carry_on: bool = await ctx.waterfall(
                    ev.AGENT_TURN_CONTINUATION, agent, turn_number, default, default=_keep_decision
                )
            except BaseException as error:
                if is_control_flow(error):
                    raise
                turn.fail(as_exception(error))
                break
            if not carry_on and agent.inbox.has_steering:
                carry_on = True
            if loop.cancel_requested:  # the continuation window
                turn.reason = _aborted(loop.cancel_reason)
                break
            if not carry_on or agent.is_disposed:
                if agent.is_disposed:
                    turn.reason = {"kind": "disposed"}
                break
        if turn.reason["kind"] in ("completed", "max-tokens"):  # only a success needs proof before it is told
            saved = await _checkpoint(loop, turn)
        turn.close_turn(emit=True)
    except BaseException as raw:
        if is_control_flow(raw):
            raise
        failure = as_exception(raw)
        opened = session.last("turn/start")
        if opened is None or opened.data.get("turn") != turn_number:
            raise failure from None if failure is raw else raw
        if turn.step_open:
            turn.step_open = False
            try:
                session.append("step/end", {"turn": turn_number, "step": turn.step})
            except Exception:
                log.exception("session/event listener failed on step/end", agent_id=agent.id)
        if agent.is_disposed and not turn.error_reported:
            turn.reason = {"kind": "disposed"}
        else:
            turn.fail(failure)
        turn.close_turn(emit=False)
    if not saved:
        return  # storage just failed: the next turn's flushes retry everything still queued
    try:
        await ctx.sessions.flush(session)
    except Exception as flush_error:
        log.warning("session/flush failed", agent_id=agent.id, turn=turn_number, error=error_message(flush_error))
        _emit_error(loop, turn_number, turn.step, flush_error)


async def _checkpoint(loop: LoopState, turn: Turn) -> bool:
    """Make a successful turn durable before its ``turn/end`` (which is what tells the user it succeeded): a
    turn whose events cannot be stored fails instead, with the storage error. Returns False when it failed."""
    try:
        await loop.ctx.sessions.flush(loop.session)
    except Exception as error:
        log.warning("session/flush failed", agent_id=loop.agent.id, turn=turn.turn, error=error_message(error))
        turn.fail(error)
        return False
    return True


async def _keep_decision(agent: object, turn: int, decision: bool) -> bool:
    return decision


async def _keep_value(*args: Any) -> Any:
    return args[-1]


def _without_tool_calls(message: Message) -> Message:
    return {"role": message["role"], "content": [b for b in message["content"] if b["type"] != "tool-call"]}


def _parse_arguments(raw: str, name: str) -> Any:
    """The call's arguments as JSON (the raw text when it is not JSON: the tool reports that).

    Raises :class:`ToolArgsError` for arguments nested deeper than :data:`MAX_JSON_DEPTH`: such a call is
    answered with an error result and never run (its arguments could not be stored or passed on safely)."""
    if not raw.strip():
        return {}
    try:
        parsed = parse_json(raw)
    except RecursionError:
        parsed = None
    except ValueError:
        return raw
    else:
        if not text_may_exceed(raw) or not exceeds_depth(parsed):
            return parsed
    raise ToolArgsError(f"the arguments of {name} are nested deeper than {MAX_JSON_DEPTH} levels")


async def _run_step(loop: LoopState, turn: Turn, signal: CancelToken) -> _StepOutcome:
    """One step (reference §3.4): assemble, call the model, log what it said, run its tool calls."""
    agent, ctx, session = loop.agent, loop.ctx, loop.session
    options = agent.options
    turn_number, step = turn.turn, turn.step
    assembly = await ctx.system_prompt.assemble(agent)
    system = "\n\n".join(part for part in (render_prompt(assembly), options.system_prompt) if part)
    request = GenerateRequest(
        model=options.model or "",
        messages=session.derive_messages(),
        system=system or None,
        tools=assembly.tools or None,
        signal=signal,
    )
    request = await ctx.waterfall(ev.AGENT_REQUEST, agent, turn_number, step, request, default=_keep_value)
    if not request.model:
        raise DshError(
            f'agent "{agent.id}" has no model: set AgentOptions.model or supply one via the agent/request waterfall',
            "NO_MODEL",
        )

    assembler = BlockAssembler()
    feed = assembler.feed
    ids = loop.call_ids.step()
    append, append_chunk = session.append, session.append_chunk
    listeners_of = ctx.app.bus.table.get
    chunk_event = ev.AGENT_STREAM_CHUNK.name
    stream = None
    with anyio.CancelScope() as stream_scope:
        remove = signal.add_callback(lambda _reason: stream_scope.cancel())
        try:
            stream = await ctx.llm.stream(request)
            count = 0
            async for chunk in stream:
                if signal.aborted:
                    break
                kind, text = chunk["type"], chunk.get("text")
                if (kind == "text-delta" or kind == "reasoning-delta") and type(text) is str and len(chunk) == 2:
                    append_chunk(turn_number, step, kind, text)
                else:
                    if kind == "tool-call-delta" or kind == "block-end":
                        chunk = ids.rename(chunk)  # the session's id from the first chunk on
                    append("assistant/chunk", {"turn": turn_number, "step": step, "chunk": chunk})
                for listener in listeners_of(chunk_event, ()):  # bus.emit, without its frame per chunk
                    listener(agent, turn_number, step, chunk)
                feed(chunk)
                count += 1
                if not count % _FAIRNESS:
                    await anyio.lowlevel.checkpoint()
        finally:
            remove()
    aclose = getattr(stream, "aclose", None) if stream is not None else None
    if aclose is not None:
        with anyio.CancelScope(shield=True):
            await aclose()
    if signal.aborted:
        raise AbortedError(signal.reason or "aborted")

    finish = assembler.finish
    if finish is not None and finish["kind"] == "error":
        raise DshError(finish.get("message") or "model error", finish.get("code"))
    if finish is not None and finish["kind"] == "aborted":
        raise DshError("model stream aborted", "ABORTED")

    usage = assembler.usage
    if finish is not None and finish["kind"] == "max-tokens":
        message = _without_tool_calls(assembler.message())
        message = _without_tool_calls(
            await ctx.waterfall(ev.AGENT_STEP_RESULT, agent, turn_number, step, message, default=_keep_value)
        )
        if message["content"]:
            append("assistant/message", {"turn": turn_number, "step": step, "content": message["content"]})
        if usage is not None:
            append("usage", {"turn": turn_number, "step": step, "usage": usage})
        return _StepOutcome(False, finish)

    message = ids.mark(
        await ctx.waterfall(
            ev.AGENT_STEP_RESULT, agent, turn_number, step, ids.mark(assembler.message()), default=_keep_value
        )
    )
    append("assistant/message", {"turn": turn_number, "step": step, "content": message["content"]})
    if usage is not None:
        append("usage", {"turn": turn_number, "step": step, "usage": usage})

    calls: list[ToolCallBlock] = [block for block in message["content"] if block["type"] == "tool-call"]
    index = 0
    while index < len(calls):
        batch = _concurrent_run(ctx, agent, calls, index)
        await _run_calls(loop, turn, batch, signal)
        index += len(batch)
    return _StepOutcome(bool(calls), finish)


def _concurrency_safe(ctx: Any, agent: ReactLoopAgent, name: str) -> bool:
    """Whether the tool *name* declared itself safe to run alongside others (``meta["concurrency_safe"]``:
    read-only, no shared state, no question to the user it could not wait its turn for)."""
    tools = ctx.get("tools")
    tool = tools.get(name, agent.session.id) if tools is not None else None
    return bool(tool is not None and tool.meta.get("concurrency_safe"))


def _concurrent_run(ctx: Any, agent: ReactLoopAgent, calls: list[ToolCallBlock], start: int) -> list[ToolCallBlock]:
    """The calls from *start* that run together: the longest run of consecutive concurrency-safe calls, or
    the one call at *start* when it is not safe."""
    end = start + 1
    if _concurrency_safe(ctx, agent, calls[start]["name"]):
        while end < len(calls) and _concurrency_safe(ctx, agent, calls[end]["name"]):
            end += 1
    return calls[start:end]


async def _run_calls(loop: LoopState, turn: Turn, batch: list[ToolCallBlock], signal: CancelToken) -> None:
    """Log the batch's ``tool/call`` events, run the calls (concurrently when there are several: the batch is
    made only of concurrency-safe calls), and log their ``tool/result`` events in the model's call order,
    each as soon as it and every call before it finished."""
    agent, ctx, append = loop.agent, loop.ctx, loop.session.append
    turn_number, step = turn.turn, turn.step
    signal.raise_if_aborted()
    for call in batch:
        append(
            "tool/call",
            {
                "turn": turn_number,
                "step": step,
                "call_id": call["id"],
                "name": call["name"],
                "arguments": call["arguments"],
            },
        )
        turn.open_calls.append(call["id"])

    async def run(call: ToolCallBlock) -> ToolResult:
        try:
            arguments = _parse_arguments(call["arguments"], call["name"])
        except ToolArgsError as refused:
            return error_result(call["id"], refused)
        return await ctx.tools.execute(ToolExecution(call["id"], call["name"], arguments, agent, signal))

    def record(call: ToolCallBlock, result: ToolResult) -> None:
        if turn.turn_ended:  # closed as disposed while the tool ran on (close_stuck_turn): nothing more is logged
            raise AbortedError("disposed")
        data: dict[str, Any] = {
            "turn": turn_number,
            "step": step,
            "call_id": call["id"],
            "content": result.content,
            "is_error": result.is_error,
        }
        if result.error is not None:
            data["error"] = result.error
        if result.display is not None:
            data["display"] = result.display
        if result.spill is not None:
            data["spill"] = result.spill
        append("tool/result", data)
        if call["id"] in turn.open_calls:
            turn.open_calls.remove(call["id"])

    if len(batch) == 1:
        record(batch[0], await run(batch[0]))
        signal.raise_if_aborted()
        return
    results: list[ToolResult | None] = [None] * len(batch)
    finished = [anyio.Event() for _ in batch]

    async def run_into(position: int) -> None:
        try:
            results[position] = await run(batch[position])
        finally:
            finished[position].set()

    async with anyio.create_task_group() as group:
        for position in range(len(batch)):
            group.start_soon(run_into, position)
        for position, call in enumerate(batch):
            await finished[position].wait()
            result = results[position]
            if result is None:  # cancelled: the task group re-raises
                break
            record(call, result)
    signal.raise_if_aborted()


DISPOSED_TEXT = "The tool did not stop when its agent was disposed; no result was recorded."


def close_stuck_turn(loop: LoopState) -> bool:
    """Close the open turn of a disposed agent whose loop did not stop within the grace (a tool that ignores its
    cancel token), before its task is cancelled: an error ``tool/result`` for the stuck call, ``step/end``,
    ``turn/end {kind: disposed}`` (and ``agent/turn-end``). Returns whether anything was closed.

    Runs while the loop is suspended at an await; the turn is marked ended, so the loop, should it resume before
    its cancellation, appends nothing more to it (``close_turn`` is idempotent, the tool's late result is
    dropped). A listener's exception is logged, never raised: this is disposal.
    """
    turn, session, agent = loop.turn, loop.session, loop.agent
    if turn is None or turn.turn_ended or not turn_is_open(session):
        return False
    opened = session.last("turn/start")
    if opened is None or opened.data.get("turn") != turn.turn:
        return False
    open_calls, turn.open_calls = turn.open_calls, []
    for call_id in open_calls:
        try:
            session.append(
                "tool/result",
                {
                    "turn": turn.turn,
                    "step": turn.step,
                    "call_id": call_id,
                    "content": [{"type": "text", "text": DISPOSED_TEXT}],
                    "is_error": True,
                    "error": {"name": "AgentDisposedError", "code": "disposed"},
                },
            )
        except Exception:
            log.exception("session/event listener failed on a disposed tool/result", agent_id=agent.id)
    if turn.step_open:
        turn.step_open = False
        try:
            session.append("step/end", {"turn": turn.turn, "step": turn.step})
        except Exception:
            log.exception("session/event listener failed on step/end", agent_id=agent.id)
    turn.reason = {"kind": "disposed"}
    try:
        turn.close_turn(emit=True)
    except Exception:
        log.exception("agent/turn-end listener failed on a disposed turn", agent_id=agent.id)
    return True


def inject(loop: LoopState, content: list[ContentBlock], source: MessageSource) -> None:
    """Append context without a model call (reference §5): into the open turn, else as a one-shot turn."""
    session, agent = loop.session, loop.agent
    if turn_is_open(session):
        session.append("context/message", {"content": content, "source": source})
        return
    turn_number = last_turn_number(session) + 1
    try:
        session.append("turn/start", {"turn": turn_number, "trigger": {"kind": "injection", "source": source}})
        session.append("context/message", {"content": content, "source": source})
    finally:
        opened = session.last("turn/start")
        if opened is not None and opened.data.get("turn") == turn_number and turn_is_open(session):
            try:
                session.append("turn/end", {"turn": turn_number, "reason": {"kind": "completed"}})
            except Exception:
                log.exception("session/event listener failed on injected turn/end", agent_id=agent.id)
            scope = loop.scope or loop.ctx.scope
            scope.spawn(_flush_injection, loop, turn_number, name=f"inject-flush:{agent.id}")


async def _flush_injection(loop: LoopState, turn_number: int) -> None:
    try:
        # Shielded: disposing the agent right after an idle inject must still hand that turn to storage,
        # while the session is attached (disposal awaits this task).
        with anyio.CancelScope(shield=True):
            await loop.ctx.sessions.flush(loop.session)
    except Exception as error:
        log.warning("session/flush failed after inject", agent_id=loop.agent.id, error=error_message(error))
        _emit_error(loop, turn_number, 0, error)


async def _no_compaction(agent: object, turn: int, request: CompactRequest) -> dict[str, Any] | None:
    return None


async def compact(loop: LoopState, instructions: str | None) -> dict[str, Any] | None:
    """``agent.compact()``: between turns (it waits for the running one), in a turn of its own (trigger
    ``compaction``) so the log stays a sequence of turns; the work is the ``agent/compact`` waterfall's (a
    plugin's). ``agent.cancel()`` aborts it; its errors reach the caller and end the turn ``error``."""
    async with loop.turn_lock:
        loop.check_alive()
        agent, session = loop.agent, loop.session
        turn_number = last_turn_number(session) + 1
        signal = CancelToken()
        loop.current_abort = signal
        turn = Turn(loop, turn_number)
        failure: Exception | None = None
        result: dict[str, Any] | None = None
        try:
            session.append("turn/start", {"turn": turn_number, "trigger": {"kind": "compaction"}})
            result = await loop.ctx.waterfall(
                ev.AGENT_COMPACT, agent, turn_number, CompactRequest(instructions, signal), default=_no_compaction
            )
        except BaseException as raw:
            if is_control_flow(raw) and not signal.aborted:
                raise
            failure = AbortedError(signal.reason or "aborted") if signal.aborted else as_exception(raw)
        finally:
            loop.current_abort = None
            loop.cancel_requested = False  # a cancel aimed at the compaction must not cancel the next turn
        if failure is not None:
            if loop.is_disposed:
                turn.reason = {"kind": "disposed"}
            elif signal.aborted:
                turn.reason = _aborted(signal.reason or "aborted")
            else:
                turn.fail(failure)
        turn.close_turn(emit=False)
        try:
            await loop.ctx.sessions.flush(session)
        except Exception as flush_error:
            log.warning("session/flush failed after compaction", agent_id=agent.id, error=error_message(flush_error))
        if failure is not None:
            raise failure
        return result
