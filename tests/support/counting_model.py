"""A model played at a :class:`~tests.support.provider_server.FakeProvider` for long turns, in any of the three
wire formats (``chat``: OpenAI Chat Completions, ``anthropic``: Messages, ``responses``: OpenAI Responses): it
counts every request, refuses one over its window as the provider does, and decides its replies itself.

* The count of a request is ``ceil(factor * (chars / 4 + 4 * items))`` where *chars* are the characters of
  everything it carries (system or instructions, message text, tool call names and arguments, tool results,
  reasoning summaries, the tool schemas' JSON) and *items* its messages: dsh's own estimate, computed on the wire,
  times *factor* (``1.5``: a provider whose tokenizer counts half as much again). It is reported as the step's
  input tokens and recorded in :attr:`CountingModel.counts`.
* A request counting more than *window* tokens gets the provider's own "too long" answer (HTTP 400:
  ``context_length_exceeded``, or Anthropic's "prompt is too long"), recorded in :attr:`CountingModel.refused`.
* A summarisation request (dsh's compaction prompt as system) is answered with a short summary.
* Any other request calls ``bulk`` (``tests.support.bulk_tool``) for *size* characters while :attr:`calls` is
  positive (each call decrements it), then answers with text. Every agent request's body is kept in
  :attr:`bodies`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from tests.support.provider_server import Recorded, Reply
from tests.support.provider_wire import (
    DONE,
    an_end,
    an_start,
    an_text,
    an_tool,
    oa_chunk,
    oa_finish,
    oa_text_reply,
    oa_tool_delta,
    oa_usage,
    rs_call,
    rs_completed,
    rs_created,
    rs_text,
)

__all__ = ["SUMMARY_MARK", "CountingModel", "is_summary_request", "wire_chars"]

SUMMARY_MARK = "You are compacting the history"


def _text_of(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    total = 0
    for part in content or []:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in ("text", "input_text", "output_text", "summary_text"):
            total += len(part.get("text") or "")
        elif kind == "thinking":
            total += len(part.get("thinking") or "")
        elif kind == "tool_use":
            total += len(part.get("name") or "") + len(json.dumps(part.get("input") or {}))
        elif kind == "tool_result":
            total += _text_of(part.get("content"))
    return total


def wire_chars(body: dict[str, Any], wire: str = "chat") -> tuple[int, int]:
    """The characters a request carries and its number of messages (or input items)."""
    chars = len(json.dumps(body["tools"])) if body.get("tools") else 0
    if wire == "responses":
        chars += len(body.get("instructions") or "")
        items = body.get("input") or []
        for item in items:
            kind = item.get("type")
            if kind == "message":
                chars += _text_of(item.get("content"))
            elif kind == "function_call":
                chars += len(item.get("name") or "") + len(item.get("arguments") or "")
            elif kind == "function_call_output":
                chars += len(item.get("output") or "")
            elif kind == "reasoning":
                chars += _text_of(item.get("summary"))
        return chars, len(items)
    if wire == "anthropic":
        chars += _text_of(body.get("system"))
    messages = body.get("messages") or []
    for message in messages:
        chars += _text_of(message.get("content"))
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            chars += len(function.get("name") or "") + len(function.get("arguments") or "")
    return chars, len(messages)


def system_text(body: dict[str, Any], wire: str = "chat") -> str:
    if wire == "responses":
        return str(body.get("instructions") or "")
    if wire == "anthropic":
        return "".join(b.get("text") or "" for b in body.get("system") or [] if isinstance(b, dict))
    messages = body.get("messages") or []
    return str(messages[0].get("content")) if messages and messages[0].get("role") == "system" else ""


def is_summary_request(body: dict[str, Any], wire: str = "chat") -> bool:
    return SUMMARY_MARK in system_text(body, wire)


@dataclass
class CountingModel:
    window: int
    factor: float = 1.0
    calls: int = 0
    size: int = 12_000
    wire: str = "chat"
    answer: str = "All done."
    counts: list[int] = field(default_factory=list)
    """The count of every agent request (summaries not included), in arrival order."""
    bodies: list[dict[str, Any]] = field(default_factory=list)
    refused: list[int] = field(default_factory=list)
    summaries: int = 0
    issued: int = 0

    def count(self, body: dict[str, Any]) -> int:
        chars, items = wire_chars(body, self.wire)
        return math.ceil(self.factor * (math.ceil(chars / 4) + 4 * items))

    def __call__(self, recorded: Recorded) -> Reply:
        body = recorded.body
        if is_summary_request(body, self.wire):
            self.summaries += 1
            return self._text(f"Summary {self.summaries}: the agent called bulk repeatedly.", 100)
        count = self.count(body)
        if count > self.window:
            self.refused.append(count)
            return self._too_long(count)
        self.counts.append(count)
        self.bodies.append(body)
        if self.calls <= 0:
            return self._text(self.answer, count)
        self.calls -= 1
        self.issued += 1
        return self._call(f"call_{self.issued}", json.dumps({"size": self.size, "label": f"r{self.issued}"}), count)

    def _too_long(self, count: int) -> Reply:
        said = f"maximum context length is {self.window} tokens. However, you requested {count}."
        if self.wire == "anthropic":
            error = {"type": "invalid_request_error", "message": f"prompt is too long: {count} tokens > {self.window}"}
            return Reply(status=400, body={"type": "error", "error": error})
        error = {"message": f"This model's {said}", "type": "invalid_request_error", "code": "context_length_exceeded"}
        return Reply(status=400, body={"error": error})

    def _text(self, text: str, count: int) -> Reply:
        if self.wire == "anthropic":
            return Reply(events=[an_start(input_tokens=count), *an_text(0, text), *an_end()])
        if self.wire == "responses":
            return Reply(events=[*rs_created(), *rs_text(0, "msg_1", text), rs_completed(input_tokens=count)])
        return Reply(events=oa_text_reply(text, prompt=count, completion=3))

    def _call(self, call_id: str, arguments: str, count: int) -> Reply:
        if self.wire == "anthropic":
            return Reply(
                events=[an_start(input_tokens=count), *an_tool(0, call_id, "bulk", [arguments]), *an_end("tool_use")]
            )
        if self.wire == "responses":
            return Reply(
                events=[
                    *rs_created(),
                    *rs_call(0, f"fc_{call_id}", call_id, "bulk", [arguments]),
                    rs_completed(input_tokens=count),
                ]
            )
        return Reply(
            events=[
                oa_chunk({"role": "assistant", "content": None}),
                oa_tool_delta(0, arguments, call_id, "bulk"),
                oa_finish("tool_calls"),
                oa_usage(count, 20),
                DONE,
            ]
        )
