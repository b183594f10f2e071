"""The ``lsp`` plugin: the pipeline's ``diagnose`` stage, servers ended with their sessions and the daemon."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from dsh import events as ev
from dsh._log import get_logger
from dsh.kernel import plugin
from dsh.lsp._config import LspConfig

if TYPE_CHECKING:
    from dsh.commands import CommandResult, Invocation
    from dsh.kernel import Context, Next
    from dsh.lsp._manager import LspManager
    from dsh.sandbox import SpawnPlan
    from dsh.services.agents import Agent
    from dsh.services.tools import ToolExecution, ToolResult

__all__ = ["EDIT_TOOLS", "MAX_FILE", "lsp_plugin"]

log = get_logger("dsh.lsp")

EDIT_TOOLS = frozenset({"edit_file", "edits", "write_file", "delete_file", "notebook_edit"})
"""The tools whose changes are diagnosed."""
READ_TOOLS = frozenset({"read_file"})
"""The tools whose success starts (in the background) the server of the file's language: the model reads a file
before it edits it, so its server is warm by the edit."""
MAX_FILE = 2 << 20
"""A file larger than this (bytes) is not sent to a server."""


def _read(path: str) -> str | None:
    try:
        if os.path.getsize(path) > MAX_FILE:
            return None
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def _texts(paths: list[str]) -> dict[str, str | None]:
    """Each path's text now (None: absent, unreadable or too large); blocking, run in a worker thread."""
    return {path: _read(path) for path in paths}


def _wanted(lsp: LspManager, execution: ToolExecution, root: str) -> list[str]:
    """The paths of *execution* that a server would diagnose; blocking (it looks servers up on ``PATH`` and the
    root's project markers up on disk)."""
    return [p for p in _paths(execution, root) if lsp.wants(p, root)]


async def _wanted_paths(lsp: LspManager, execution: ToolExecution, root: str) -> list[str]:
    """:func:`_wanted`, on the event loop when every answer is known already (the usual case: no thread hop per
    call), else in a worker thread."""
    paths = _paths(execution, root)
    known = [lsp.known_wants(p, root) for p in paths]
    if None not in known:
        return [p for p, wanted in zip(paths, known, strict=True) if wanted]
    from anyio import to_thread

    return await to_thread.run_sync(_wanted, lsp, execution, root)


def _paths(execution: ToolExecution, cwd: str) -> tuple[str, ...]:
    if execution.prepared is not None:
        return execution.prepared.paths
    arguments = execution.arguments
    path = arguments.get("path") if isinstance(arguments, dict) else None
    return (os.path.join(cwd, path),) if isinstance(path, str) else ()


@plugin("lsp", inject=("tools",))
def lsp_plugin(ctx: Context, config: LspConfig | dict[str, Any] | None = None) -> None:
    """Join the ``diagnose`` stage: after an allowed edit of a file a server knows, append the diagnostics that
    are new since before it; after a read of such a file, start its server in the background (see
    :mod:`dsh.lsp`). ``enabled: false``: nothing at all. Servers run at the sandbox level of approved commands
    (the ``sandbox`` service, when loaded)."""
    settings = config if isinstance(config, LspConfig) else LspConfig.model_validate(config or {})
    if not settings.active:
        return
    manager: LspManager | None = None

    def get_manager() -> LspManager:
        nonlocal manager
        if manager is None:
            from dsh.lsp._manager import LspManager

            manager = LspManager(settings, confine, unconfine)
            ctx.spawn(idle_stop, manager, name="lsp:idle")
        return manager

    async def confine(root: str, family: str) -> SpawnPlan | None:
        """The spawn plan of approved commands for a server of *root* (RFC 0028), without network unless
        ``lsp.network``, under a sandbox "session" of the server's own (its private temporary directory and
        rulesets, removed when the server stops)."""
        sandbox = ctx.get("sandbox")
        if sandbox is None:
            return None
        from anyio import to_thread

        from dsh.sandbox import Containment

        machine = await to_thread.run_sync(lambda: sandbox.support)  # probed once; never on the event loop
        level = sandbox.approved_level(None) if machine.available else "off"
        if level == "off":
            return None
        network = None if settings.network else False  # cut unless lsp.network: true (then sandbox.network)
        containment = Containment(level, _sandbox_key(root, family), "", (root,), sandbox, network)
        plan: SpawnPlan | None = await containment.plan()
        return plan

    def unconfine(root: str, family: str) -> None:
        sandbox = ctx.get("sandbox")
        if sandbox is not None:
            sandbox.dispose_session(_sandbox_key(root, family))

    async def idle_stop(lsp: LspManager) -> None:
        """Every quarter of ``idle``: stop the servers unused for ``idle`` seconds (none started: nothing to do)."""
        import asyncio

        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(settings.idle / 4)
            stopped = lsp.sweep(loop.time())
            if stopped:
                log.info("stopped idle language servers", pids=stopped)

    async def diagnose(execution: ToolExecution, next_: Next[ToolExecution, ToolResult]) -> ToolResult:
        if execution.name in READ_TOOLS:
            return await warm(execution, await next_())
        if execution.name not in EDIT_TOOLS:
            return await next_()
        from anyio import to_thread

        agent = execution.agent
        root = _root(agent)
        lsp = get_manager()
        paths = await _wanted_paths(lsp, execution, root)
        if not paths:
            return await next_()
        before = await to_thread.run_sync(_texts, paths)
        result = await next_()
        if result.is_error:
            return result
        after = await to_thread.run_sync(_texts, paths)
        changes = [(p, before[p], after[p]) for p in paths]
        report = await lsp.after_edit(changes, root, agent.session.id if agent is not None else "")
        for note in report.notes:
            log.info("diagnostics", note=note)
        text = report.render(root)
        if not text:
            return result
        display = {**(result.display or {}), "diagnostics": report.as_json()}
        return replace(result, content=[*result.content, {"type": "text", "text": text}], display=display)

    async def warm(execution: ToolExecution, result: ToolResult) -> ToolResult:
        """After a successful read: start the file's server in the background; the result is untouched."""
        if result.is_error:
            return result
        agent = execution.agent
        root = _root(agent)
        lsp = get_manager()
        for path in await _wanted_paths(lsp, execution, root):
            lsp.warm(path, root, agent.session.id if agent is not None else "")
        return result

    def disposed(agent: Agent) -> None:
        if manager is not None:
            stopped = manager.release(agent.session.id)
            if stopped:
                log.info("stopped language servers of a closed session", pids=stopped)

    def at_exit() -> None:
        if manager is not None:
            manager.close()

    ctx.tools.stage("diagnose", diagnose)
    _register_diagnostics(ctx, get_manager)
    ctx.on(ev.AGENT_DISPOSED, disposed)
    ctx.effect(at_exit)


class DiagnosticsArgs(BaseModel):
    path: str | None = Field(
        default=None,
        description="A file (relative to the working directory, or absolute) to check now; omit it for every "
        "diagnostic the language servers know in the working directory (the files edited or checked so far).",
    )


DIAGNOSTICS_DESCRIPTION = (
    "The language server's diagnostics (errors by default) for a file, checked now, or for the files of the "
    "working directory it knows. Edits already report their new diagnostics; use this to see a file's existing ones."
)


def _register_diagnostics(ctx: Context, get_manager: Callable[[], LspManager]) -> None:
    from dsh.services.tools import define_tool

    async def diagnostics(args: DiagnosticsArgs, execution: ToolExecution) -> str:
        return await report_for(get_manager(), args.path, execution.agent)

    tool = define_tool("diagnostics", DIAGNOSTICS_DESCRIPTION, DiagnosticsArgs, diagnostics)
    ctx.tools.register(replace(tool, meta={"kind": "read"}))

    async def command(invocation: Invocation) -> CommandResult:
        from dsh.commands import CommandResult

        text = await report_for(get_manager(), invocation.args.strip() or None, invocation.agent)
        return CommandResult(text=text)

    commands = ctx.get("commands")  # loaded before this plugin by dsh.app; absent in a core without commands
    if commands is not None:
        commands.register(
            "diagnostics", "Show the language servers' diagnostics (a file, or all known)", command, "[file]"
        )


def _root(agent: Agent | None) -> str:
    """The session's root (its cwd; a worktree session's is the worktree), else the daemon's directory."""
    cwd = agent.session.header.cwd if agent is not None else None
    return cwd if cwd and os.path.isabs(cwd) else os.getcwd()


def _sandbox_key(root: str, family: str) -> str:
    """The sandbox "session" of a server: letters, digits and dashes (its temporary directory goes under the data
    directory), one per root and language family."""
    import hashlib

    return f"lsp-{family}-{hashlib.sha256(root.encode()).hexdigest()[:16]}"


def _inside(root: str, path: str) -> str | None:
    """*path* (relative to *root*, or absolute) made absolute, or None when it is outside *root* (lexically)."""
    full = os.path.normpath(os.path.join(root, path))
    return full if os.path.commonpath([full, root]) == root else None


async def report_for(lsp: LspManager, path: str | None, agent: Agent | None) -> str:
    """What the ``diagnostics`` tool and ``/diagnostics`` say for *path* (None: every known one of the root)."""
    from anyio import to_thread

    from dsh.lsp._manager import render_list

    root = _root(agent)
    session = agent.session.id if agent is not None else ""
    if path is None:
        known = lsp.known(root)
        return (
            render_list(known, root)
            if known
            else "No diagnostics known (none of the files edited or checked so far has any)."
        )
    full = _inside(root, path)
    if full is None:
        return f"Error: {path} is outside the working directory"
    text = (await to_thread.run_sync(_texts, [full]))[full]
    if text is None:
        return f"Error: cannot read {path}"
    items, notes = await lsp.check(full, text, root, session)
    body = render_list(items, root) if items else f"No diagnostics in {path}."
    return "\n".join([body, *notes])
