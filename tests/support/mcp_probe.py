"""A daemon plugin that records what the model is asked (``DSH_PLUGINS=tests.support.mcp_probe:plugin``).

Every ``llm/stream`` request (the final request, after every ``agent/request`` listener) is appended to the JSON
Lines file named by ``DSH_PROBE_FILE``: the session id is not on the request, so each line has the model, the
tool names offered, the number of messages, and whether the MCP SDK (``mcp``) is loaded in the daemon.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsh import events as ev
from dsh.kernel import plugin as dsh_plugin

if TYPE_CHECKING:
    from dsh.kernel import Context, Next
    from dsh.services.llm import GenerateRequest

__all__ = ["plugin", "requests"]


def requests(path: Path) -> list[dict[str, Any]]:
    """The recorded requests, in order (none when the file does not exist yet)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _append(target: str, line: dict[str, Any]) -> None:
    with open(target, "a", encoding="utf-8") as file:
        file.write(json.dumps(line) + "\n")


@dsh_plugin("mcp-probe")
def plugin(ctx: Context, config: object) -> None:
    target = os.environ["DSH_PROBE_FILE"]

    async def record(request: GenerateRequest, next_: Next[GenerateRequest, Any]) -> Any:
        line = {
            "model": request.model,
            "tools": [tool["name"] for tool in request.tools or []],
            "messages": len(request.messages),
            "mcp_loaded": "mcp" in sys.modules,
        }
        _append(target, line)
        return await next_(request)

    ctx.on(ev.LLM_STREAM, record)
