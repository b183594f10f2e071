"""The OpenAI Chat Completions wire format (OpenAI, DeepSeek, vLLM, Ollama, llama.cpp, LM Studio, OpenRouter).

:func:`openai_adapter` turns a :class:`~dsh.providers._http.HttpProvider` into an ``llm`` adapter that streams
``POST {base_url}/chat/completions``: the call around the events (abort, opening, parsing, the tail) is
:func:`~dsh.providers._stream.sse_adapter`'s; here are the body and what the events mean.

What is sent: the system prompt as the first ``system`` message; user text (a string, or content parts when an
image is present); assistant text and tool calls (``tool_calls`` with the raw argument JSON); each tool result
as a ``role: tool`` message, in order, right where it stood; never reasoning blocks (DeepSeek rejects them). A
``tool`` message takes text only, so a tool result's images are named in its text and sent as ``image_url``
parts of one user message right after the run of tool messages, each call's images after a label naming it.
Tools as ``{type: function, function: {name, description, parameters[, strict]}}``; ``stream_options:
{include_usage: true}``; ``temperature``, ``max_tokens`` (the request's, else the provider's), ``stop`` only when
set; ``extra`` merged last, untouched.

What is streamed (the adapter contract of :mod:`dsh.services.llm`): ``content`` deltas as ``text-delta``,
``reasoning_content`` (or ``reasoning``) deltas as ``reasoning-delta``, one ``tool-call-delta`` per streamed
tool-call delta, with the id the first delta of its ``index`` carried (one is made up when a server sends
none, and a new id on the same index starts a new call); then exactly one ``usage`` (when the server sent one)
and one ``finish``, after the stream's end. ``finish_reason`` ``stop`` → stop (tool-calls when tool calls were
streamed), ``length`` → max-tokens, ``tool_calls`` → tool-calls, ``content_filter`` → a ``finish`` of kind error
code ``CONTENT_FILTER``. An error object in the stream raises ``LlmError``; a stream that ends without a finish
reason raises ``LlmError`` code ``STREAM_INTERRUPTED``. An aborted call ends with ``finish`` ``aborted``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from dsh.providers._stream import bearer, sse_adapter
from dsh.services.llm import (
    Adapter,
    FinishReason,
    GenerateRequest,
    Message,
    StreamChunk,
    ToolCallDelta,
    Usage,
)

if TYPE_CHECKING:
    from dsh.providers._http import Endpoint, HttpProvider

__all__ = ["build_body", "openai_adapter", "to_openai_messages"]


def _text_of(blocks: list[Any]) -> str:
    return "".join(b["text"] for b in blocks if b.get("type") == "text")


def _tool_result_text(block: dict[str, Any], images: list[dict[str, Any]]) -> str:
    """The text of a ``role: tool`` message (Chat Completions takes text only there); each image is named in
    it, and its part (after a label naming the call) is added to *images*, for the user message that follows
    the run of tool messages."""
    parts: list[str] = []
    labelled = False
    for item in block.get("content") or []:
        if item.get("type") == "text":
            parts.append(item["text"])
        elif item.get("type") == "image":
            from dsh.images import describe_image

            note = f"[image: {describe_image(item)}; attached in the next user message]"
            parts.append(f"\n{note}" if parts else note)
            if not labelled:
                labelled = True
                images.append({"type": "text", "text": f"Images returned by tool call {block['tool_call_id']}:"})
            images.append({"type": "image_url", "image_url": {"url": item["url"]}})
    return "".join(parts)


def _user_part(block: dict[str, Any]) -> dict[str, Any]:
    if block["type"] == "text":
        return {"type": "text", "text": block["text"]}
    return {"type": "image_url", "image_url": {"url": block["url"]}}


def to_openai_messages(messages: list[Message], system: str | None) -> list[dict[str, Any]]:
    """The Chat Completions ``messages`` for a conversation (see the module docstring)."""
    out: list[dict[str, Any]] = []
    if system:
        out.append({"role": "system", "content": system})
    pending: list[dict[str, Any]] = []
    """Image parts of tool results not sent yet: they go in a user message after the run of tool messages."""
    for message in messages:
        blocks: list[Any] = list(message["content"])
        if message["role"] == "assistant":
            text = _text_of(blocks)
            calls = [
                {
                    "id": b["id"],
                    "type": "function",
                    "function": {"name": b["name"], "arguments": b["arguments"] or "{}"},
                }
                for b in blocks
                if b.get("type") == "tool-call"
            ]
            if not text and not calls:
                continue
            if pending:
                out.append({"role": "user", "content": pending})
                pending = []
            entry: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                entry["tool_calls"] = calls
            out.append(entry)
            continue
        rest: list[Any] = []
        for block in blocks:
            if block.get("type") == "tool-result":
                text = _tool_result_text(block, pending)
                out.append({"role": "tool", "tool_call_id": block["tool_call_id"], "content": text})
            elif block.get("type") in ("text", "image"):
                rest.append(block)
        if not rest:
            continue  # images of tool results wait: more tool messages of the same step may follow
        if not pending and all(b["type"] == "text" for b in rest):
            out.append({"role": "user", "content": _text_of(rest)})
        else:
            out.append({"role": "user", "content": pending + [_user_part(b) for b in rest]})
            pending = []
    if pending:
        out.append({"role": "user", "content": pending})
    return out


def build_body(request: GenerateRequest, model: str, max_tokens: int | None) -> dict[str, Any]:
    """The JSON body of a streaming Chat Completions request."""
    body: dict[str, Any] = {
        "model": model,
        "messages": to_openai_messages(request.messages, request.system),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        tools: list[dict[str, Any]] = []
        for tool in request.tools:
            function: dict[str, Any] = {
                "name": tool["name"],
                "description": tool["description"],
                "parameters": tool["parameters"],
            }
            if "strict" in tool:
                function["strict"] = tool["strict"]
            tools.append({"type": "function", "function": function})
        body["tools"] = tools
    if request.temperature is not None:
        body["temperature"] = request.temperature
    limit = request.max_tokens or max_tokens
    if limit:
        body["max_tokens"] = limit
    if request.stop:
        body["stop"] = list(request.stop)
    body.update(request.extra)
    return body


def _usage(raw: dict[str, Any]) -> Usage:
    usage: Usage = {}
    for ours, theirs in (("input_tokens", "prompt_tokens"), ("output_tokens", "completion_tokens")):
        value = raw.get(theirs)
        if isinstance(value, int):
            usage[ours] = value  # type: ignore[literal-required]
    if isinstance(raw.get("total_tokens"), int):
        usage["total_tokens"] = raw["total_tokens"]
    prompt_details = raw.get("prompt_tokens_details") or {}
    cached = prompt_details.get("cached_tokens") if isinstance(prompt_details, dict) else None
    if not isinstance(cached, int):
        cached = raw.get("prompt_cache_hit_tokens")  # DeepSeek
    if isinstance(cached, int):
        usage["cache_read_tokens"] = cached
    completion_details = raw.get("completion_tokens_details") or {}
    reasoning = completion_details.get("reasoning_tokens") if isinstance(completion_details, dict) else None
    if isinstance(reasoning, int):
        usage["reasoning_tokens"] = reasoning
    return usage


def _finish(reason: str, had_tool_calls: bool, provider: str) -> FinishReason:
    if reason == "length":
        return {"kind": "max-tokens"}
    if reason in ("tool_calls", "function_call"):
        return {"kind": "tool-calls"}
    if reason == "content_filter":
        return {
            "kind": "error",
            "message": f"{provider}: the provider's content filter stopped the answer (finish_reason "
            "content_filter); rephrase the request or use another model",
            "code": "CONTENT_FILTER",
        }
    return {"kind": "tool-calls"} if had_tool_calls else {"kind": "stop"}


class _ToolCalls:
    """Stable ids for streamed tool-call deltas, keyed by ``index`` (or by id when a server omits the index)."""

    __slots__ = ("_by_index", "_ids")

    def __init__(self) -> None:
        self._by_index: dict[int, str] = {}
        self._ids: set[str] = set()

    def __bool__(self) -> bool:
        return bool(self._ids)

    def id_for(self, delta: dict[str, Any]) -> str:
        raw_id = delta.get("id") or None
        index = delta.get("index")
        if not isinstance(index, int):
            if raw_id is None:
                index = max(self._by_index, default=0)  # a continuation of the latest call
            elif raw_id in self._ids:
                return str(raw_id)
            else:
                index = max(self._by_index, default=-1) + 1  # a new call
        known = self._by_index.get(index)
        if known is not None and (raw_id is None or raw_id == known):
            return known
        call_id = str(raw_id) if raw_id is not None and raw_id not in self._ids else f"call_{uuid.uuid4().hex[:24]}"
        self._by_index[index] = call_id
        self._ids.add(call_id)
        return call_id


class _Decoder:
    """One Chat Completions call's events: deltas of choice 0, the usage, the finish reason; done at ``[DONE]``
    (usage comes after the finish reason)."""

    unfinished = "the model finished (no finish_reason)"

    def __init__(self, http: HttpProvider, endpoint: Endpoint) -> None:
        self._http = http
        self._key = endpoint.api_key
        self._calls = _ToolCalls()
        self._finish_reason: str | None = None
        self._usage: Usage | None = None
        self.done = False

    def feed(self, event: str, payload: dict[str, Any]) -> Iterator[StreamChunk]:
        error = payload.get("error")
        if error:
            message = error.get("message") if isinstance(error, dict) else str(error)
            raise self._http.error(f"error in the stream: {message}", "PROVIDER_ERROR", self._key)
        if isinstance(payload.get("usage"), dict):
            self._usage = _usage(payload["usage"])
        for choice in payload.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                yield {"type": "reasoning-delta", "text": reasoning}
            content = delta.get("content")
            if isinstance(content, str) and content:
                yield {"type": "text-delta", "text": content}
            for tool_delta in delta.get("tool_calls") or []:
                if not isinstance(tool_delta, dict):
                    continue
                function = tool_delta.get("function") or {}
                chunk: ToolCallDelta = {
                    "type": "tool-call-delta",
                    "id": self._calls.id_for(tool_delta),
                    "arguments_delta": function.get("arguments") or "",
                }
                if function.get("name"):
                    chunk["name"] = function["name"]
                yield chunk
            if choice.get("finish_reason"):
                self._finish_reason = str(choice["finish_reason"])

    def finish(self) -> FinishReason | None:
        if self._finish_reason is None:
            return None
        return _finish(self._finish_reason, bool(self._calls), self._http.name)

    def usage(self) -> Usage | None:
        return self._usage


def openai_adapter(http: HttpProvider) -> Adapter:
    """An adapter serving ``<provider>:<model>`` over Chat Completions through *http*."""
    return sse_adapter(http, "/chat/completions", bearer, build_body, lambda endpoint: _Decoder(http, endpoint))
