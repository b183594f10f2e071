"""A model played at a :class:`~tests.support.provider_server.FakeProvider` (OpenAI Chat Completions wire) for long
turns: it counts every request, refuses one over its window as OpenAI does, and decides its replies itself.

* The count of a request is ``ceil(factor * chars / 4)`` where *chars* are the characters of everything it
  carries (system and message text, tool call names and arguments, tool results, the tool schemas' JSON): dsh's
  own estimate, computed on the wire, times *factor* (``1.5``: a provider whose tokenizer counts half as much
  again). It is reported as the step's ``prompt_tokens`` and recorded in :attr:`CountingModel.counts`.
* A request counting more than *window* tokens gets OpenAI's 400 ``context_length_exceeded`` (recorded in
  :attr:`CountingModel.refused`).
* A summarisation request (dsh's compaction prompt as system message) is answered with a short summary.
* Any other request calls ``bulk`` (``tests.support.bulk_tool``) for *size* characters while :attr:`calls` is
  positive (each call decrements it), then answers with text.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from tests.support.provider_server import Recorded, Reply
from tests.support.provider_wire import DONE, oa_chunk, oa_finish, oa_text_reply, oa_tool_delta, oa_usage

__all__ = ["SUMMARY_MARK", "CountingModel", "wire_chars"]

SUMMARY_MARK = "You are compacting the history"


def wire_chars(body: dict[str, Any]) -> int:
    """The characters a Chat Completions request carries (what dsh's estimate counts, read off the wire)."""
    chars = len(json.dumps(body["tools"])) if body.get("tools") else 0
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            chars += sum(len(part.get("text") or "") for part in content if isinstance(part, dict))
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            chars += len(function.get("name") or "") + len(function.get("arguments") or "")
    return chars


def is_summary_request(body: dict[str, Any]) -> bool:
    messages = body.get("messages") or []
    return bool(messages) and messages[0].get("role") == "system" and SUMMARY_MARK in str(messages[0].get("content"))


@dataclass
class CountingModel:
    window: int
    factor: float = 1.0
    calls: int = 0
    size: int = 12_000
    answer: str = "All done."
    counts: list[int] = field(default_factory=list)
    """The count of every agent request (summaries not included), in arrival order."""
    refused: list[int] = field(default_factory=list)
    summaries: int = 0
    issued: int = 0

    def count(self, body: dict[str, Any]) -> int:
        messages = len(body.get("messages") or [])
        return math.ceil(self.factor * (math.ceil(wire_chars(body) / 4) + 4 * messages))

    def __call__(self, recorded: Recorded) -> Reply:
        body = recorded.body
        if is_summary_request(body):
            self.summaries += 1
            return Reply(events=oa_text_reply(f"Summary {self.summaries}: the agent called bulk repeatedly."))
        count = self.count(body)
        if count > self.window:
            self.refused.append(count)
            message = f"This model's maximum context length is {self.window} tokens. However, you requested {count}."
            error = {"message": message, "type": "invalid_request_error", "code": "context_length_exceeded"}
            return Reply(status=400, body={"error": error})
        self.counts.append(count)
        if self.calls <= 0:
            return Reply(events=oa_text_reply(self.answer, prompt=count, completion=3))
        self.calls -= 1
        self.issued += 1
        arguments = json.dumps({"size": self.size, "label": f"r{self.issued}"})
        return Reply(
            events=[
                oa_chunk({"role": "assistant", "content": None}),
                oa_tool_delta(0, arguments, f"call_{self.issued}", "bulk"),
                oa_finish("tool_calls"),
                oa_usage(count, 20),
                DONE,
            ]
        )
