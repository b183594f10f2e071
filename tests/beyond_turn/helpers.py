"""What the tests of issue #38 share: loopback provider replies, a gated reply, what a request told the model."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
from acp import text_block

from tests.support.provider_server import Event, Reply
from tests.support.provider_wire import oa_text_reply, oa_tool_reply
from tests.support.sdk import DshProcess

WAIT = 60.0


def tool_call(call_id: str, name: str, arguments: dict[str, Any]) -> Reply:
    return Reply(events=oa_tool_reply(call_id, name, arguments))


def text(reply: str) -> Reply:
    return Reply(events=oa_text_reply(reply))


def env_for(url: str) -> dict[str, str | None]:
    return {**provider_env(url)}


def user_texts(body: dict[str, Any]) -> str:
    """Everything the request gave the model as user text (steering and context are user messages in a tag)."""
    texts = []
    for message in body["messages"]:
        if message["role"] != "user":
            continue
        content = message["content"]
        texts.append(content if isinstance(content, str) else " ".join(str(part.get("text", "")) for part in content))
    return "\n".join(texts)


def tool_results(body: dict[str, Any]) -> dict[str, str]:
    return {m["tool_call_id"]: str(m["content"]) for m in body["messages"] if m["role"] == "tool"}


@dataclass
class Gated(Event):
    """An event the server sends only once *gate* is set (the responder runs under the server's lock; the
    streaming of a reply does not)."""

    gate: threading.Event = field(default_factory=threading.Event)

    def encode(self) -> bytes:
        self.gate.wait(WAIT)
        return super().encode()


def gated(reply: Reply, gate: threading.Event) -> Reply:
    first = reply.events[0]
    reply.events[0] = Gated(first.data, first.event, first.delay, gate)
    return reply


async def steer(daemon: DshProcess, session_id: str, words: str) -> dict[str, Any]:
    block = text_block(words).model_dump(by_alias=True, exclude_none=True)
    return await daemon.conn.ext_method("dsh/session/steer", {"sessionId": session_id, "prompt": [block]})


@asynccontextmanager
async def prompting(daemon: DshProcess, session_id: str, words: str) -> AsyncIterator[list[Any]]:
    """Send the prompt *words* and run the block while its turn runs; the list holds its answer after the block
    (the ``async with`` waits for it)."""
    answers: list[Any] = []

    async def run() -> None:
        answers.append(await daemon.prompt(session_id, words))

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        yield answers


def provider_env(url: str) -> dict[str, str]:
    """The variables that point the ``openai`` provider at the loopback server at *url*."""
    return {"OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": "test"}
