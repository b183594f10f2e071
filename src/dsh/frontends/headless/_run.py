"""``dsh exec``: one task through the real loop, for scripts, CI and evaluation harnesses.

Guarantees:

* **stdout carries only the run's output.** With ``json``: one JSON object per line, one per loop event of the
  agent stream (RFC 0013: ``{"type": "agent/turn-end", "sessionId", "agentId", …the same fields}``, sent by the
  same encoder as ``_dsh/agent/*``), then exactly one ``{"type": "result", …}`` line, whatever happened after
  the application started (an error, a refusal, an interrupt). Without it: the final answer, then a newline;
  progress and diagnostics go to stderr. Logs never reach stdout.
* **Exit status**: 0 the turn completed and no tool call was refused; 1 it failed (an error, a refused call, a
  limit: ``--max-steps``, ``--timeout``, the model's output limit); 2 usage (a model no provider serves, a bad
  option, ``--session`` with ``--ephemeral``); 3 a spend budget stopped it (``--max-cost``, ``--max-tokens``, the
  configuration's ``budget``; RFC 0039); 130 interrupted (SIGINT or SIGTERM).
* **Spend budgets**: ``--max-cost USD`` and ``--max-tokens N`` are the run's turn budgets (``turn_usd``,
  ``turn_tokens`` of :mod:`dsh.spend`, sub-agents included), held by this process only (never stored in the
  session); what the budget package says (a warning, a price it does not know) is a line on stderr (``--json``:
  ``{"type": "notice"}``).
* **Ctrl+C cancels the turn cleanly**: the agent is cancelled as an editor's ``session/cancel`` would, the turn is
  closed and saved, and the session can be continued with ``--session``; a second Ctrl+C exits at once (the
  session file stays loadable: the interrupted turn is closed when it is next loaded).
* **Sessions are the editor's sessions**: stored in the same data directory (``dsh sessions list`` shows them, an
  editor can load them), ``--session ID`` continues any stored session, ``--ephemeral`` stores nothing.
* **MCP servers of the configuration file start for the run** (as for every editor session); one that cannot
  start is reported once (a line on stderr, or ``{"type": "mcp/unavailable"}``) and the run goes on without it.
* **Notices and hooks are seen**: a ``session/notice`` of the run's session is a line on stderr (warnings and
  errors) or ``{"type": "notice", "severity", "source", "message"}``; each hook run (:mod:`dsh.hooks`) is
  ``{"type": "hook/run", "hook_event", "command", "line", …}`` with ``--json``. The run waits (bounded) for the
  hooks still running in the background (``SessionEnd``) before it exits.
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import uuid
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import anyio

from dsh import events as ev
from dsh.frontends.headless._progress import Progress
from dsh.frontends.headless._result import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    RunTracker,
    exit_code,
    failure_line,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from dsh.kernel import Context, Next
    from dsh.notices import Notice
    from dsh.policy import PolicyConfig
    from dsh.services.agents import Agent, AgentHandle
    from dsh.services.llm import StreamChunk
    from dsh.services.sessions import Session, SessionEvent
    from dsh.settings import Settings

__all__ = ["ExecOptions", "result_written", "run_exec"]

_written = False


def result_written() -> bool:
    """Whether this process already wrote its run's result (the entry point's own interrupt handling, which
    covers start-up and shut-down, then writes none)."""
    return _written


SECOND_SIGNAL_GRACE = 5.0
"""After the first interrupt, how long the turn gets to close before the run ends anyway."""


@dataclass(frozen=True)
class ExecOptions:
    task: str
    cwd: str
    json: bool = False
    session: str | None = None
    ephemeral: bool = False
    max_steps: int | None = None
    timeout: float | None = None
    mode: str | None = None
    """The policy's mode (RFC 0017); None: the configuration's ``permissions.mode``, else ``default``."""
    allow_reads: bool = False
    allow_edits: bool = False
    allow_all: bool = False
    max_cost: float | None = None
    """``--max-cost USD``: the run's turn budget in US dollars (:mod:`dsh.spend`)."""
    max_tokens: int | None = None
    """``--max-tokens N``: the run's turn budget in tokens."""
    wait_background: bool = False
    """``--wait-background``: before exiting, wait for the session's background commands to end, each ending told
    to the model in a turn of its own (:func:`_wait_background`)."""
    worktree: bool = False
    """Work in a new git worktree on branch ``dsh/<short id>`` (RFC 0040); None of the run's files are written in
    the main tree. Without it, the configuration's ``worktrees.mode: always`` gives one all the same."""


def _drop_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


class _Output:
    """Where the run's lines go: JSON lines or the person's progress."""

    def __init__(self, as_json: bool) -> None:
        self.json = as_json
        self.progress = Progress()

    def event(self, method: str, params: dict[str, Any]) -> None:
        """An ``_dsh/agent/*`` notification of the agent stream, as one line ``{"type": "agent/…", …}``."""
        self.line({"type": method.removeprefix("_dsh/"), **params})

    def line(self, obj: dict[str, Any]) -> None:
        """One line on stdout, flushed. A reader that went away (``dsh exec --json | head -1``) is not an error
        of the run: stdout is pointed at /dev/null and the run goes on to its end (and its exit status)."""
        text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n"
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except BrokenPipeError:
            _drop_stdout()

    def note(self, kind: str, text: str, **fields: Any) -> None:
        """Something that is not a loop event (a server that did not start): a line of its own."""
        if self.json:
            self.line({"type": kind, **fields, "message": text})
        else:
            self.progress.line(text)


@dataclass
class _State:
    interrupted: bool = False
    limited: str | None = None
    budget: dict[str, Any] | None = None
    """The ``spend/stop`` of the run's turn, when a spend budget stopped it."""
    handle: AgentHandle | None = None
    last_words: Any = None
    """Writes the result of a run ended by a second signal (set once the run's tracker exists)."""
    stop: anyio.Event = field(default_factory=anyio.Event)
    """Set by the first interrupt (what ``--wait-background`` waits on besides the commands)."""


async def run_exec(options: ExecOptions, settings: Settings) -> int:
    """Run the task; return the exit status (see the module docstring)."""
    from dsh._log import open_log

    with open_log(settings.log_level, settings.log_file):
        state = _State()
        # The receiver is in place before anything can stream: a Ctrl+C is the run's from the first moment (left
        # to asyncio's runner, an early one would cancel the run abruptly, with no result line).
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with anyio.create_task_group() as watcher:
                watcher.start_soon(_watch_signals, state, signals)
                code = await _run(options, settings, state)
                watcher.cancel_scope.cancel()
        return code


FLAGS = "run dsh exec with --allow-edits, --allow-all, --allow-reads or --mode, or add a permissions: rule"
"""How the model (and so the user) is told a refused call can be allowed."""


def _policy(options: ExecOptions, settings: Settings) -> PolicyConfig:
    """Nobody can be asked in a headless run: what would ask is refused, unless the flags allow it (RFC 0017's
    :func:`dsh.policy.unattended_policy`; deny rules hold whatever the flags say). A bad mode is ValueError."""
    from dsh.policy import unattended_policy

    loaded = settings.config
    return unattended_policy(
        loaded.permissions if loaded is not None else None,
        mode=options.mode,
        allow_reads=options.allow_reads,
        allow_edits=options.allow_edits,
        allow_all=options.allow_all,
        flags=FLAGS,
    )


def _seal_secrets(ctx: Context) -> None:
    """As the daemon does once the policy is installed (RFC 0024): provider keys leave this process's start-up
    environment block and it becomes non-dumpable, so a command the model runs cannot read them from
    ``/proc/$PPID``; and the run becomes its descendants' subreaper. A platform that allows neither is a logged
    warning, never a failed run."""
    from dsh._log import get_logger
    from dsh.secrets import seal_and_adopt

    log = get_logger("dsh.exec")
    seal_and_adopt(lambda message, problem: log.warning(message, problem=problem), "the run", ctx.get("secret_policy"))


def _load(ctx: Context, options: ExecOptions, settings: Settings, policy: PolicyConfig) -> None:
    from dsh.app import load_product

    load_product(
        ctx,
        settings.config,
        data_dir=None if options.ephemeral else settings.data_dir,
        policy=policy,
        mcp_timeout=settings.get("mcp_timeout"),
    )


async def _run(options: ExecOptions, settings: Settings, state: _State) -> int:
    from dsh.kernel import App

    output = _Output(options.json)
    try:
        policy = _policy(options, settings)
    except ValueError as error:
        sys.stderr.write(f"dsh exec: --mode: {error}\n")
        return EXIT_USAGE
    async with App() as app:
        ctx = app.ctx
        _load(ctx, options, settings, policy)
        _seal_secrets(ctx)
        from dsh.extra_plugins import apply_plugins, import_plugins
        from dsh.settings import SettingError

        try:  # DSH_PLUGINS, as dsh acp loads them (after the core, before the model is checked: one may add it)
            apply_plugins(ctx, import_plugins(settings.plugins))
        except SettingError as error:
            sys.stderr.write(f"dsh: {error.message}\n")
            return error.exit_code
        problem = ctx.llm.unserved(settings.model)
        if problem is not None:
            sys.stderr.write(f"dsh: {settings.origin('model')}: {problem}\n")
            return EXIT_USAGE
        missing = ctx.llm.missing_credentials(settings.model)
        if missing is not None:
            how = f"export {missing}=…" if "." not in missing else f"set {missing} in {settings.config_path}"
            sys.stderr.write(f"dsh exec: model {settings.model} needs an API key: {how}, or run `dsh setup`\n")
            return EXIT_USAGE
        session_id = options.session or str(uuid.uuid4())
        tracker = RunTracker(session_id)

        def last_words() -> None:
            global _written
            if output.json and not _written:
                _written = True
                output.line(tracker.result(limited=state.limited, interrupted=True, cost=None))

        state.last_words = last_words
        _listen(ctx, session_id, tracker, output, state)
        if options.json:
            from dsh.agent_stream import AgentStream

            AgentStream(ctx, output.event, forced=True)
        _cap_steps(ctx, session_id, tracker, state, options.max_steps)
        try:
            cwd = await _worktree(ctx, options, session_id, output) if options.session is None else options.cwd
            state.handle = await _open(ctx, replace(options, cwd=cwd), settings, session_id)
        except _OpenError as error:
            sys.stderr.write(f"dsh exec: {error}\n")
            return EXIT_FAILED
        handle = state.handle
        _limit_spend(ctx, session_id, options)
        _open_mcp(ctx, session_id, handle, output)
        failure: dict[str, Any] | None = None
        async with anyio.create_task_group() as group:
            if not options.json:
                group.start_soon(output.progress.spin)
            if not state.interrupted:
                handle.agent.send([{"type": "text", "text": options.task}], {"kind": "user"})
                await _wait(handle.agent, state, options.timeout)
                if options.wait_background:
                    await _wait_background(ctx, handle.agent, state, options.timeout)
            group.cancel_scope.cancel()
        mcp = ctx.get("mcp")
        if mcp is not None:
            with anyio.move_on_after(2.0, shield=True):
                await mcp.close(session_id)
        with anyio.CancelScope(shield=True):
            hooks = ctx.get("hooks")
            if hooks is not None:  # Notification hooks run in the background, and disposing the session reaps
                await hooks.settle()  # the processes it tagged: let them finish first
            await handle.dispose()  # the turn's end is flushed to the session file here
            if hooks is not None:  # SessionEnd hooks start at the disposal, in the background: let them finish
                await hooks.settle()
        if tracker.reason is None and not state.interrupted and state.limited is None:
            failure = {"message": "the turn did not run"}
        cost = _cost(ctx, settings.model, tracker)
        result = tracker.result(
            limited=state.limited, interrupted=state.interrupted, cost=cost, error=failure, budget=state.budget
        )
    return _finish(result, output, options.ephemeral)


def _finish(result: dict[str, Any], output: _Output, ephemeral: bool) -> int:
    global _written
    code = exit_code(result)
    if output.json and not _written:
        _written = True
        output.line(result)
    else:
        output.progress.clear()
        if result["text"]:
            try:
                sys.stdout.write(result["text"].rstrip("\n") + "\n")
                sys.stdout.flush()
            except BrokenPipeError:
                _drop_stdout()
    reason = failure_line(result)
    if reason is not None:
        sys.stderr.write(f"dsh exec: {reason}\n")
    if code == EXIT_INTERRUPTED and not ephemeral:
        sys.stderr.write(f"dsh exec: continue with: dsh exec --session {result['sessionId']} TASK\n")
    return code


class _OpenError(Exception):
    pass


async def _worktree(ctx: Context, options: ExecOptions, session_id: str, output: _Output) -> str:
    """The run's cwd: in a new worktree when asked (or configured), said on stderr (``{"type": "worktree"}``
    with ``--json``); a worktree that cannot be made is an :class:`_OpenError` (the run does not start)."""
    from dsh.worktrees import WorktreeError, WorktreeRequest, Worktrees

    service: Worktrees | None = ctx.get("worktrees")
    if service is None or (not options.worktree and service.mode != "always"):  # ask: nobody to ask here
        return options.cwd
    try:
        opening = await service.for_new_session(
            session_id, options.cwd, WorktreeRequest() if options.worktree else None
        )
    except WorktreeError as error:
        raise _OpenError(f"--worktree: {error.message}") from None
    if opening.created is None:
        if opening.note is not None:
            output.note("worktree", opening.note, sessionId=session_id)
        return options.cwd
    worktree = opening.created.worktree
    text = f"{opening.created.summary()} Merge: git -C {worktree.repo} merge {worktree.branch}"
    output.note("worktree", text, sessionId=session_id, branch=worktree.branch, path=worktree.path)
    return worktree.cwd


async def _open(ctx: Context, options: ExecOptions, settings: Settings, session_id: str) -> AgentHandle:
    from dsh.services.agents import AgentOptions

    agent_options = AgentOptions(model=settings.model, system_prompt=settings.system_prompt)
    if options.session is None:
        return await ctx.agents.create(
            agent_id=session_id, session_id=session_id, meta={"cwd": options.cwd}, agent_options=agent_options
        )
    worktrees = ctx.get("worktrees")
    if worktrees is not None:
        from dsh.worktrees import WorktreeError

        try:
            await worktrees.reopen(session_id)  # a worktree removed by hand: said, the run does not start
        except WorktreeError as error:
            raise _OpenError(f"cannot continue session {session_id}: {error.message}") from None
    try:
        return await ctx.agents.resume(agent_id=session_id, resume_session_id=session_id, agent_options=agent_options)
    except FileNotFoundError:
        raise _OpenError(f"no stored session {session_id} in {settings.data_dir}") from None
    except Exception as exc:
        from dsh.errors import error_message

        raise _OpenError(f"cannot continue session {session_id}: {error_message(exc)}") from None


def _open_mcp(ctx: Context, session_id: str, handle: AgentHandle, output: _Output) -> None:
    manager = ctx.get("mcp")
    if manager is None:
        return
    cwd = handle.agent.session.header.cwd

    def report(server: str, message: str) -> None:
        output.note("mcp/unavailable", message, sessionId=session_id, server=server)

    manager.open(session_id, [], cwd=cwd, report=report)


def _limit_spend(ctx: Context, session_id: str, options: ExecOptions) -> None:
    limits: dict[str, float] = {}
    if options.max_cost is not None:
        limits["turn_usd"] = options.max_cost
    if options.max_tokens is not None:
        limits["turn_tokens"] = options.max_tokens
    spend = ctx.get("spend")
    if limits and spend is not None:
        spend.limit_run(session_id, limits)


def _listen(ctx: Context, session_id: str, tracker: RunTracker, output: _Output, state: _State) -> None:
    progress = output.progress

    def ours(agent: Agent) -> bool:
        return agent.session.id == session_id

    def on_turn_start(agent: Agent, turn: int) -> None:
        if ours(agent):  # the last turn is the run's (a compaction may run as a turn of its own before it)
            tracker.turn_started(turn)

    def on_turn_end(agent: Agent, turn: int, reason: Any) -> None:
        if ours(agent) and turn == tracker.turn:
            tracker.reason = reason

    def on_step_start(agent: Agent, turn: int, step: int) -> None:
        if ours(agent) and turn == tracker.turn:
            tracker.step_started()

    def on_step_end(agent: Agent, turn: int, step: int) -> None:
        if ours(agent) and turn == tracker.turn:
            tracker.step_ended()

    def on_chunk(agent: Agent, turn: int, step: int, chunk: StreamChunk) -> None:
        if ours(agent) and turn == tracker.turn:
            tracker.chunk(chunk)

    def on_session_event(session: Session, event: SessionEvent) -> None:
        if event.type == "hook/run" and output.json and session.id == session_id:  # dsh.hooks; failures: notices
            output.line({"type": "hook/run", "sessionId": session_id, **event.data})
            return
        if session.id != session_id or event.data.get("turn") != tracker.turn:
            return
        if event.type == "spend/stop":
            state.limited = "budget"
            state.budget = {
                key: event.data[key] for key in ("budget", "limit", "spent", "message") if key in event.data
            }
        elif event.type == "tool/call":
            tracker.tool_call(event.data)
            progress.tool_call(event.data["name"], event.data.get("arguments", ""))
        elif event.type == "tool/result":
            name = tracker.names.get(event.data["call_id"], "a tool")
            denied = len(tracker.denied)
            tracker.tool_result(event.data)
            failed = None
            if event.data.get("is_error"):
                texts = [b.get("text", "") for b in event.data.get("content", []) if b.get("type") == "text"]
                failed = (" ".join(texts).strip().splitlines() or ["failed"])[0][:200]
            if len(tracker.denied) > denied:
                failed = f"refused: {failed}"
            progress.tool_result(name, None if output.json else failed)

    def on_notice(notice: Notice) -> None:
        if notice.session_id != session_id:
            return
        if notice.source == "budgets":  # dsh.spend: the warning and the line saying why a budget cannot hold
            text = notice.title if not notice.description else f"{notice.title}. {notice.description}"
            output.note("notice", text, sessionId=session_id, severity=notice.severity)
        elif output.json:
            fields = {"sessionId": session_id, "severity": notice.severity, "source": notice.source}
            output.line({"type": "notice", **fields, "message": notice.title})
        elif notice.severity != "info":
            progress.line(notice.title)

    ctx.on(ev.AGENT_TURN_START, on_turn_start)
    ctx.on(ev.AGENT_TURN_END, on_turn_end)
    ctx.on(ev.AGENT_STEP_START, on_step_start)
    ctx.on(ev.AGENT_STEP_END, on_step_end)
    ctx.on(ev.AGENT_STREAM_CHUNK, on_chunk)
    ctx.on(ev.SESSION_EVENT, on_session_event)
    ctx.on(ev.SESSION_NOTICE, on_notice)


def _cap_steps(ctx: Context, session_id: str, tracker: RunTracker, state: _State, limit: int | None) -> None:
    """``--max-steps N``: once the run's turn made N model calls, the turn does not go on (``agent/turn-continuation``)."""
    if limit is None:
        return

    async def cap(agent: Agent, turn: int, default: bool, next_: Next[bool, bool]) -> bool:
        decision = await next_(default)
        if decision and agent.session.id == session_id and turn == tracker.turn and tracker.steps >= limit:
            state.limited = "max-steps"
            return False
        return decision

    ctx.on(ev.AGENT_TURN_CONTINUATION, cap)


async def _watch_signals(state: _State, signals: AsyncIterator[int]) -> None:
    """First SIGINT / SIGTERM: cancel the turn (the run then ends as interrupted); a second one: exit now."""
    async for _ in signals:
        if state.interrupted:
            if state.last_words is not None:
                state.last_words()
            sys.stderr.write("\ndsh exec: interrupted again; exiting now\n")
            sys.stderr.flush()
            os._exit(EXIT_INTERRUPTED)
        state.interrupted = True
        state.stop.set()
        if state.handle is not None:
            state.handle.agent.cancel("interrupted")


async def _wait(agent: Agent, state: _State, deadline: float | None) -> None:
    """Until the agent is idle again; past *deadline* seconds, cancel the turn and wait for it to close."""
    if deadline is None:
        await agent.when_idle()
        return
    with anyio.move_on_after(deadline):
        await agent.when_idle()
        return
    if not state.interrupted:
        state.limited = "timeout"
    agent.cancel("timeout")
    await agent.when_idle()


async def _wait_background(ctx: Context, agent: Agent, state: _State, deadline: float | None) -> None:
    """``--wait-background``: while the session has background commands running, wait for one to end, then give
    the model every ending it has not seen in a turn of its own (the run's answer is the last turn's); return
    once none runs and the model saw every ending. An interrupt, a budget stop or the timeout (each wait is
    bounded by *deadline*, as the task's turn is) ends the wait; the session's disposal then stops what runs."""
    from dsh.background import WAKE_TEXT

    registry = ctx.get("background_commands")
    if registry is None:
        return
    session_id = agent.session.id
    while not state.interrupted and state.limited is None and state.budget is None:
        running = [entry for entry in registry.list(session_id) if entry.running]
        if running:
            with anyio.move_on_after(deadline if deadline is not None else math.inf) as waited:
                async with anyio.create_task_group() as group:

                    async def first_end(event: anyio.Event) -> None:
                        await event.wait()
                        group.cancel_scope.cancel()

                    for entry in running:
                        group.start_soon(first_end, entry.exited)
                    group.start_soon(first_end, state.stop)
            if waited.cancelled_caught:
                state.limited = "timeout"
                return
            if state.interrupted:
                return
        if not registry.unseen(session_id):
            if running:
                continue
            return
        agent.send([{"type": "text", "text": WAKE_TEXT}], {"kind": "plugin", "plugin": "background"})
        await _wait(agent, state, deadline)


def _cost(ctx: Context, model: str, tracker: RunTracker) -> float | None:
    """What the run's model calls cost: the configured price, else the built-in table's (the context service
    knows both); None when neither knows the model or nothing was used."""
    context = ctx.get("context")
    price = context.price(model) if context is not None else ctx.llm.model_info(model).price
    if price is None or not tracker.usage:
        return None
    return round(price.cost(tracker.usage), 6)  # type: ignore[arg-type]
