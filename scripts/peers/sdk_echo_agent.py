"""A minimal ACP agent built on the official Python SDK (``agent-client-protocol``): the benchmark's peer.

It does what dsh does with its default ``echo`` model, and nothing more: ``initialize``, ``session/new``,
``session/prompt`` (the prompt's text streamed back one word piece per ``agent_message_chunk``, whitespace
kept, the same pieces dsh's echo model yields) and ``session/cancel`` (the running prompt stops at the next
piece and answers ``cancelled``). Everything runs through the SDK's own connection, router and writer, so
the numbers measure the SDK's stack.

Run: ``.venv/bin/python scripts/peers/sdk_echo_agent.py`` (speaks ACP on stdin/stdout).
"""

from __future__ import annotations

import asyncio
import re
import uuid
from typing import Any, cast

from acp.core import RequestError, run_agent
from acp.helpers import update_agent_message_text
from acp.interfaces import Agent, Client
from acp.meta import PROTOCOL_VERSION
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
)

_PIECE = re.compile(r"\s*\S+\s*|\s+")  # the same split as dsh's echo model: "".join(pieces) == text


class EchoAgent:
    """Duck-typed against ``acp.interfaces.Agent``: methods it lacks are answered -32601 by the SDK router."""

    def __init__(self) -> None:
        self._client: Client | None = None
        self._cancelled: dict[str, asyncio.Event] = {}

    def on_connect(self, conn: Client) -> None:
        self._client = conn

    async def initialize(
        self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None, **kwargs: Any
    ) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(prompt_capabilities=PromptCapabilities()),
            agent_info=Implementation(name="sdk-echo", title="SDK echo peer", version="0.1.0"),
        )

    async def new_session(self, cwd: str, mcp_servers: Any = None, **kwargs: Any) -> NewSessionResponse:
        session_id = str(uuid.uuid4())
        self._cancelled[session_id] = asyncio.Event()
        return NewSessionResponse(session_id=session_id)

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        if self._client is None or session_id not in self._cancelled:
            raise RequestError.invalid_params({"sessionId": session_id})
        cancelled = self._cancelled[session_id] = asyncio.Event()  # a fresh flag per turn
        text = "".join(block.text for block in prompt if getattr(block, "type", None) == "text")
        for piece in _PIECE.findall(text):
            if cancelled.is_set():
                return PromptResponse(stop_reason="cancelled")
            await self._client.session_update(session_id, update_agent_message_text(piece))
        return PromptResponse(stop_reason="cancelled" if cancelled.is_set() else "end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        flag = self._cancelled.get(session_id)
        if flag is not None:
            flag.set()


def main() -> None:
    # Duck-typed on purpose: inheriting the Agent protocol would turn every missing method into a stub that
    # answers null instead of -32601, so the type checker is told what the router checks at run time.
    asyncio.run(run_agent(cast(Agent, EchoAgent())))


if __name__ == "__main__":
    main()
