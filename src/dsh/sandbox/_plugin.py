"""The ``sandbox`` plugin: provides the ``sandbox`` service, says once at start-up what confines commands here,
and forgets each session's containment state when the session is disposed."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dsh import events as ev
from dsh.kernel import plugin
from dsh.sandbox._sandbox import CHOICE_EVENT, FORCE_NO_ASK_ENV, Sandbox, log
from dsh.sandbox._support import support

if TYPE_CHECKING:
    from dsh.kernel import Context
    from dsh.sandbox._config import ApprovedLevel, SandboxConfig

__all__ = ["sandbox_command_plugin", "sandbox_plugin"]


@plugin("sandbox", inject=("tools",))
def sandbox_plugin(ctx: Context, config: SandboxConfig | Mapping[str, Any] | None) -> None:
    """*config*: the file's ``sandbox`` section (None: the defaults), or ``{"config": section, "data_dir": path}``
    (the sessions' private temporary directories go under the data directory)."""
    data_dir = None
    if isinstance(config, Mapping):
        data_dir = config.get("data_dir")
        config = config.get("config")
    sandbox = Sandbox(config, ctx=ctx, data_dir=str(data_dir) if data_dir is not None else None)
    ctx.provide("sandbox", sandbox)
    ctx.tools.stage("contain", sandbox.contain_step)
    ctx.effect(sandbox.close)

    def announce() -> None:
        support()
        line = sandbox.describe()
        if sandbox.support.available:
            log.info(line)
        else:
            log.warning(line)
        if sandbox.force_no_ask:
            log.warning(f"{FORCE_NO_ASK_ENV}=1: TEST HOOK, commands the policy would ask about run without asking")

    # The namespace probe starts a process: not on the event loop, and in a daemon thread that never holds up the
    # daemon's exit (a worker thread would be joined at exit).
    threading.Thread(target=announce, name="dsh-sandbox-probe", daemon=True).start()

    told: set[str] = set()

    async def tell(session_id: str) -> None:
        """A session's first turn on a machine without a sandbox: one notice (RFC 0033), besides the start-up log."""
        import anyio

        machine = await anyio.to_thread.run_sync(support)  # probed once; never on the event loop
        if not machine.available:
            from dsh.notices import Notice, post_notice

            why = f"{machine.why}: every command asks first and runs unconfined once approved"
            post_notice(ctx, Notice(session_id, "warning", "Commands run without a sandbox", why, source="sandbox"))

    def turn_started(agent: Any, turn: int) -> None:
        if agent.session.id not in told:
            told.add(agent.session.id)
            ctx.spawn(tell, agent.session.id, name=f"sandbox-notice:{agent.session.id}")

    def session_disposed(session: Any) -> None:
        sandbox.dispose_session(session.id)
        told.discard(session.id)

    ctx.on(ev.AGENT_TURN_START, turn_started)
    ctx.on(ev.SESSION_DISPOSED, session_disposed)


@plugin("sandbox_command", inject=("commands",))
def sandbox_command_plugin(ctx: Context, config: object) -> None:
    """``/sandbox``: show where this session's commands run, or choose where its approved commands run
    (``workspace-write`` or ``off``); commands that run without a question stay at ``read-only`` either way."""
    from dsh.commands import CommandResult, Invocation

    async def handler(invocation: Invocation) -> CommandResult:
        sandbox: Sandbox | None = ctx.get("sandbox")
        if sandbox is None:
            return CommandResult(text="No sandbox service in this daemon.")
        session = invocation.agent.session.id
        wanted = invocation.args.strip()
        if wanted:
            if wanted not in ("workspace-write", "off"):
                return CommandResult(text=f"Unknown level {wanted!r}: choose workspace-write or off.")
            level: ApprovedLevel = "workspace-write" if wanted == "workspace-write" else "off"
            sandbox.choose(session, level)
            invocation.agent.session.append(CHOICE_EVENT, {"approved": level})
        current = sandbox.approved_level(session)
        marks = [f"- {level}{' (current)' if level == current else ''}" for level in ("workspace-write", "off")]
        lines = [sandbox.describe(session), "Approved commands run at (switch with /sandbox <level>):", *marks]
        return CommandResult(text="\n".join(lines))

    ctx.commands.register(
        "sandbox", "Show the sandbox, or choose where approved commands run", handler, "[workspace-write|off]"
    )
