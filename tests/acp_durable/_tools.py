"""Test plugins for the daemon (``DSH_PLUGINS=tests.acp_durable._tools:<name>``), each registering one tool.

* ``crash_plugin`` — ``crash_now`` makes the session's log durable (``sessions.flush``: its ``tool/call`` is on
  disk), then SIGKILLs its own daemon. It puts a kill exactly between a ``tool/call`` and its ``tool/result``,
  which a kill from outside cannot hit on purpose: an unknown tool's error result follows its call at once, and
  usually in the same write.
* ``cancel_plugin`` — ``until_cancelled`` runs until its call's cancel token fires, then fails with the reason
  (a well-behaved long tool: the loop never hard-cancels tools, it waits for their result).
"""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING, Any

from dsh.kernel import plugin
from dsh.services.tools import ToolDefinition, ToolExecution

if TYPE_CHECKING:
    from dsh.kernel import Context

__all__ = ["CANCEL_PLUGIN", "CRASH_PLUGIN", "cancel_plugin", "crash_plugin"]

CRASH_PLUGIN = "tests.acp_durable._tools:crash_plugin"
CANCEL_PLUGIN = "tests.acp_durable._tools:cancel_plugin"


@plugin("durable-tests-crash-tool", inject=("tools", "sessions"))
def crash_plugin(ctx: Context, config: object) -> None:
    async def crash(arguments: Any, execution: ToolExecution) -> str:
        assert execution.agent is not None
        await ctx.sessions.flush(execution.agent.session)
        os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError("unreachable: the process was killed")

    ctx.tools.register(
        ToolDefinition("crash_now", "Flush the session, then SIGKILL this daemon.", {"type": "object"}, crash)
    )


@plugin("durable-tests-cancel-tool", inject=("tools",))
def cancel_plugin(ctx: Context, config: object) -> None:
    async def until_cancelled(arguments: Any, execution: ToolExecution) -> str:
        assert execution.signal is not None
        reason = await execution.signal.wait()
        raise RuntimeError(f"stopped: {reason}")

    ctx.tools.register(ToolDefinition("until_cancelled", "Run until cancelled.", {"type": "object"}, until_cancelled))
