"""A minimal ACP agent built on the official Python SDK (``agent-client-protocol``): the benchmark's peer.

It does what dsh does with its default ``echo`` model, and nothing more: ``initialize``, ``session/new``,
``session/prompt`` (the prompt's text streamed back one word piece per ``agent_message_chunk``, whitespace
kept, the same pieces dsh's echo model yields) and ``session/cancel`` (the running prompt stops at the next
piece and answers ``cancelled``). Everything runs through the SDK's own connection, router and writer, so
the numbers measure the SDK's stack.

With ``SDK_PEER_DATA_DIR`` set it also keeps sessions, as minimally as an agent can: every update it sends is
appended to ``<dir>/<sessionId>.jsonl`` (one JSON line each, the update as sent), and ``session/load``
replays a stored session's lines as ``session/update`` notifications (each parsed back into the SDK's model),
then answers. No crash repair, no locking, no history for a model: the floor of a durable agent on the SDK,
for ``scripts/bench_persistence.py``'s load figure.

With ``SDK_PEER_DELAY`` set (seconds) it waits that long after each piece it sends: a reply slow enough to stop.

Run: ``.venv/bin/python scripts/peers/sdk_echo_agent.py`` (speaks ACP on stdin/stdout).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import uuid
from pathlib import Path
from typing import Any, cast

from acp.core import RequestError, run_agent
from acp.helpers import update_agent_message_text
from acp.interfaces import Agent, Client
from acp.meta import PROTOCOL_VERSION
from acp.schema import (
    AgentCapabilities,
    AgentMessageChunk,
    Implementation,
    InitializeResponse,
    LoadSessionResponse,
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
        data_dir = os.environ.get("SDK_PEER_DATA_DIR")
        self._data_dir = Path(data_dir) if data_dir else None
        self._delay = float(os.environ.get("SDK_PEER_DELAY") or 0)

    def on_connect(self, conn: Client) -> None:
        self._client = conn

    async def initialize(
        self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None, **kwargs: Any
    ) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                prompt_capabilities=PromptCapabilities(), load_session=self._data_dir is not None
            ),
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
        store = self._data_dir / f"{session_id}.jsonl" if self._data_dir is not None else None
        with store.open("a", encoding="utf-8") if store is not None else _NoFile() as log:
            for piece in _PIECE.findall(text):
                if cancelled.is_set():
                    return PromptResponse(stop_reason="cancelled")
                update = update_agent_message_text(piece)
                log.write(update.model_dump_json(by_alias=True, exclude_none=True) + "\n")
                await self._client.session_update(session_id, update)
                if self._delay:
                    await asyncio.sleep(self._delay)  # a slow reply, for tests that stop one
        return PromptResponse(stop_reason="cancelled" if cancelled.is_set() else "end_turn")

    async def load_session(self, cwd: str, session_id: str, mcp_servers: Any = None, **kwargs: Any) -> Any:
        if self._client is None or self._data_dir is None or "/" in session_id:
            raise RequestError.invalid_params({"sessionId": session_id})
        try:
            lines = (self._data_dir / f"{session_id}.jsonl").open(encoding="utf-8")
        except FileNotFoundError:
            raise RequestError.invalid_params({"sessionId": session_id}) from None
        with lines:
            for line in lines:
                await self._client.session_update(session_id, AgentMessageChunk.model_validate(json.loads(line)))
        self._cancelled[session_id] = asyncio.Event()
        return LoadSessionResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        flag = self._cancelled.get(session_id)
        if flag is not None:
            flag.set()


class _NoFile:
    """Where updates go when the peer keeps no sessions."""

    def __enter__(self) -> _NoFile:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def write(self, line: str) -> None:
        return None


def main() -> None:
    # Duck-typed on purpose: inheriting the Agent protocol would turn every missing method into a stub that
    # answers null instead of -32601, so the type checker is told what the router checks at run time.
    asyncio.run(run_agent(cast(Agent, EchoAgent())))


if __name__ == "__main__":
    main()
