"""The Anthropic Messages wire format.

:func:`anthropic_adapter` turns a :class:`~dsh.providers._http.HttpProvider` into an ``llm`` adapter that streams
``POST {base_url}/v1/messages`` with ``x-api-key`` and ``anthropic-version`` (the call around the events, from abort
to the tail, is :func:`~dsh.providers._stream.sse_adapter`'s).

What is sent: ``system`` top level (one text block); prompt-cache breakpoints (``cache_control`` ephemeral) on the
system block, on the last tool and on the last block of each of the last two user messages (the four breakpoints
the API allows), so they move with the conversation and each step reads everything up to where the previous one
ended from the cache; ``max_tokens`` always (the request's, else the provider's, else 8192);
messages with consecutive same-role messages merged (the API wants tool results for one assistant turn in one
user message) and ``tool_result`` blocks first in a user message; assistant ``tool_use`` blocks with the parsed
arguments (``{}`` when they are not a JSON object); reasoning blocks only when they carry the signature Anthropic
needs (``thinking``) or redacted data (``redacted_thinking``), never empty text blocks, never empty messages.
Tools as ``{name, description, input_schema}``; ``temperature`` and ``stop_sequences`` only when set; ``extra``
merged last, untouched (``thinking: {type: enabled, budget_tokens: …}`` turns thinking on).

What is streamed: ``text_delta`` → ``text-delta``; ``thinking_delta`` → ``reasoning-delta``, and at the end of a
thinking block a ``block-end`` with the whole reasoning block and its ``signature`` (a redacted block ends as a
reasoning block with empty text and ``redacted`` data), so that the next request can send it back; ``tool_use``
→ a ``tool-call-delta`` with id and name, then one per ``input_json_delta``. After ``message_stop``: one ``usage``
(``input_tokens`` counts every prompt token, cached ones included, as with OpenAI; cache reads and writes also
apart) and one ``finish``: ``end_turn``/``stop_sequence``/``pause_turn`` → stop, ``max_tokens`` → max-tokens,
``tool_use`` → tool-calls, ``refusal`` → error ``CONTENT_FILTER``. An ``error`` event raises ``LlmError``; a
stream that ends before ``message_stop`` raises ``LlmError`` code ``STREAM_INTERRUPTED``. An aborted call ends
with ``finish`` ``aborted``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

from dsh.providers._stream import sse_adapter
from dsh.services.llm import (
    Adapter,
    ContentBlock,
    FinishReason,
    GenerateRequest,
    Message,
    StreamChunk,
    Usage,
)

if TYPE_CHECKING:
    from dsh.providers._http import Endpoint, HttpProvider

__all__ = ["ANTHROPIC_VERSION", "DEFAULT_MAX_TOKENS", "anthropic_adapter", "build_body", "to_anthropic_messages"]

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 8192


def _image(url: str) -> dict[str, Any]:
    if url.startswith("data:") and ";base64," in url:
        media_type, _, data = url[5:].partition(";base64,")
        return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _arguments(raw: str) -> dict[str, Any]:
    try:
        parsed = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _tool_result(block: dict[str, Any]) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for item in block.get("content") or []:
        if item.get("type") == "text" and item.get("text"):
            content.append({"type": "text", "text": item["text"]})
        elif item.get("type") == "image":
            content.append(_image(item["url"]))
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": block["tool_call_id"], "content": content}
    if block.get("is_error"):
        result["is_error"] = True
    return result


def _convert(block: dict[str, Any], role: str) -> dict[str, Any] | None:
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": block["text"]} if block["text"] else None
    if kind == "image":
        return _image(block["url"])
    if kind == "tool-result" and role == "user":
        return _tool_result(block)
    if kind == "tool-call" and role == "assistant":
        return {"type": "tool_use", "id": block["id"], "name": block["name"], "input": _arguments(block["arguments"])}
    if kind == "reasoning" and role == "assistant":
        if isinstance(block.get("redacted"), str):
            return {"type": "redacted_thinking", "data": block["redacted"]}
        if isinstance(block.get("signature"), str):
            return {"type": "thinking", "thinking": block["text"], "signature": block["signature"]}
    return None


def to_anthropic_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """The Messages API ``messages`` for a conversation (see the module docstring)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        blocks = [c for b in message["content"] if (c := _convert(cast(dict[str, Any], b), role)) is not None]
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    for entry in out:
        if entry["role"] == "user":
            content = entry["content"]
            entry["content"] = [b for b in content if b["type"] == "tool_result"] + [
                b for b in content if b["type"] != "tool_result"
            ]
    return out


CACHE_CONTROL: dict[str, str] = {"type": "ephemeral"}


USER_BREAKPOINTS = 2
"""Breakpoints on the conversation (with the system prompt's and the last tool's: the four the API allows)."""


def _mark_last_user_turns(messages: list[dict[str, Any]]) -> None:
    """Cache breakpoints on the last block of the last two user messages, so they move with the conversation:
    the newest writes the whole conversation so far to the cache, and the one before it is where the previous
    step's request ended, so this request reads everything up to there from the cache and pays only for the
    step in between."""
    marked = 0
    for message in reversed(messages):
        if marked == USER_BREAKPOINTS:
            return
        if message["role"] == "user" and message["content"]:
            message["content"][-1] = {**message["content"][-1], "cache_control": CACHE_CONTROL}
            marked += 1


def build_body(request: GenerateRequest, model: str, max_tokens: int | None) -> dict[str, Any]:
    """The JSON body of a streaming Messages request."""
    messages = to_anthropic_messages(request.messages)
    _mark_last_user_turns(messages)
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_tokens or max_tokens or DEFAULT_MAX_TOKENS,
        "messages": messages,
        "stream": True,
    }
    if request.system:
        body["system"] = [{"type": "text", "text": request.system, "cache_control": CACHE_CONTROL}]
    if request.tools:
        body["tools"] = [
            {"name": t["name"], "description": t["description"], "input_schema": t["parameters"]} for t in request.tools
        ]
        body["tools"][-1]["cache_control"] = CACHE_CONTROL
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.stop:
        body["stop_sequences"] = list(request.stop)
    body.update(request.extra)
    return body


def _finish(reason: str | None, provider: str) -> FinishReason:
    if reason == "max_tokens":
        return {"kind": "max-tokens"}
    if reason == "tool_use":
        return {"kind": "tool-calls"}
    if reason == "refusal":
        return {
            "kind": "error",
            "message": f"{provider}: the model refused to answer (stop_reason refusal); rephrase the request",
            "code": "CONTENT_FILTER",
        }
    if reason == "model_context_window_exceeded":
        return {
            "kind": "error",
            "message": f"{provider}: the conversation no longer fits the model's context window",
            "code": "CONTEXT_WINDOW_EXCEEDED",
        }
    return {"kind": "stop"}


_ERROR_CODES = {"overloaded_error": "OVERLOADED", "rate_limit_error": "RATE_LIMITED"}


class _Usage:
    __slots__ = ("cache_read", "cache_write", "input", "output", "seen")

    def __init__(self) -> None:
        self.input = self.output = self.cache_read = self.cache_write = 0
        self.seen = False

    def update(self, raw: Any) -> None:
        if not isinstance(raw, dict):
            return
        self.seen = True
        for attribute, key in (
            ("input", "input_tokens"),
            ("output", "output_tokens"),
            ("cache_read", "cache_read_input_tokens"),
            ("cache_write", "cache_creation_input_tokens"),
        ):
            value = raw.get(key)
            if isinstance(value, int):
                setattr(self, attribute, value)

    def chunk(self) -> Usage:
        usage: Usage = {
            "input_tokens": self.input + self.cache_read + self.cache_write,
            "output_tokens": self.output,
        }
        if self.cache_read:
            usage["cache_read_tokens"] = self.cache_read
        if self.cache_write:
            usage["cache_write_tokens"] = self.cache_write
        return usage


class _Block:
    __slots__ = ("data", "id", "kind", "signature", "text")

    def __init__(self, kind: str, block_id: str = "", data: str = "") -> None:
        self.kind = kind
        self.id = block_id
        self.data = data
        self.text: list[str] = []
        self.signature = ""


def _headers(endpoint: Endpoint) -> dict[str, str]:
    headers = {"anthropic-version": ANTHROPIC_VERSION}
    if endpoint.api_key:
        headers["x-api-key"] = endpoint.api_key
    return headers


class _Decoder:
    """One Messages call's events: content blocks by index (text, tool use, thinking with its signature,
    redacted thinking), usage from ``message_start`` and ``message_delta``; done at ``message_stop``."""

    unfinished = "the model finished (no message_stop)"

    def __init__(self, http: HttpProvider, endpoint: Endpoint) -> None:
        self._http = http
        self._key = endpoint.api_key
        self._blocks: dict[int, _Block] = {}
        self._usage = _Usage()
        self._stop_reason: str | None = None
        self._stopped = False
        self.done = False

    def feed(self, event: str, payload: dict[str, Any]) -> Iterator[StreamChunk]:
        blocks = self._blocks
        kind = payload.get("type") or event
        if kind == "content_block_delta":
            block = blocks.get(payload.get("index", -1))
            delta = payload.get("delta") or {}
            delta_type = delta.get("type")
            if delta_type == "text_delta" and delta.get("text"):
                yield {"type": "text-delta", "text": delta["text"]}
            elif delta_type == "thinking_delta" and delta.get("thinking"):
                if block is not None:
                    block.text.append(delta["thinking"])
                yield {"type": "reasoning-delta", "text": delta["thinking"]}
            elif delta_type == "signature_delta" and block is not None:
                block.signature += delta.get("signature") or ""
            elif delta_type == "input_json_delta" and block is not None and block.kind == "tool_use":
                yield {"type": "tool-call-delta", "id": block.id, "arguments_delta": delta.get("partial_json") or ""}
        elif kind == "content_block_start":
            index = payload.get("index", -1)
            start = payload.get("content_block") or {}
            start_type = start.get("type")
            if start_type == "tool_use":
                blocks[index] = _Block("tool_use", str(start.get("id") or f"toolu_{index}"))
                initial = start.get("input")
                yield {
                    "type": "tool-call-delta",
                    "id": blocks[index].id,
                    "name": str(start.get("name") or ""),
                    "arguments_delta": json.dumps(initial) if initial else "",
                }
            elif start_type == "thinking":
                blocks[index] = _Block("thinking")
                if start.get("thinking"):
                    blocks[index].text.append(start["thinking"])
                    yield {"type": "reasoning-delta", "text": start["thinking"]}
                blocks[index].signature = start.get("signature") or ""
            elif start_type == "redacted_thinking":
                blocks[index] = _Block("redacted_thinking", data=str(start.get("data") or ""))
            elif start_type == "text":
                blocks[index] = _Block("text")
                if start.get("text"):
                    yield {"type": "text-delta", "text": start["text"]}
        elif kind == "content_block_stop":
            block = blocks.pop(payload.get("index", -1), None)
            if block is not None and block.kind == "thinking" and block.signature:
                done: dict[str, Any] = {"type": "reasoning", "text": "".join(block.text), "signature": block.signature}
                yield {"type": "block-end", "block": cast(ContentBlock, done)}
            elif block is not None and block.kind == "redacted_thinking":
                redacted: dict[str, Any] = {"type": "reasoning", "text": "", "redacted": block.data}
                yield {"type": "block-end", "block": cast(ContentBlock, redacted)}
        elif kind == "message_start":
            self._usage.update((payload.get("message") or {}).get("usage"))
        elif kind == "message_delta":
            self._stop_reason = (payload.get("delta") or {}).get("stop_reason") or self._stop_reason
            self._usage.update(payload.get("usage"))
        elif kind == "message_stop":
            self._stopped = self.done = True
        elif kind == "error":
            error = payload.get("error") or {}
            error_type = error.get("type") if isinstance(error, dict) else None
            message = error.get("message") if isinstance(error, dict) else None
            raise self._http.error(
                f"error in the stream: {message or error_type or 'unknown error'}",
                _ERROR_CODES.get(str(error_type), "PROVIDER_ERROR"),
                self._key,
            )

    def finish(self) -> FinishReason | None:
        return _finish(self._stop_reason, self._http.name) if self._stopped else None

    def usage(self) -> Usage | None:
        return self._usage.chunk() if self._usage.seen else None


def anthropic_adapter(http: HttpProvider) -> Adapter:
    """An adapter serving ``<provider>:<model>`` over the Messages API through *http*."""
    return sse_adapter(http, "/v1/messages", _headers, build_body, lambda endpoint: _Decoder(http, endpoint))
