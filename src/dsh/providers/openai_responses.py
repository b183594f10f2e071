"""The OpenAI Responses wire format (``POST {base_url}/responses``): OpenAI's reasoning models (``o1``, ``o3``,
``o4``, ``gpt-5`` families) keep their reasoning between the calls of a turn only through it.

:func:`responses_adapter` turns a :class:`~dsh.providers._http.HttpProvider` into an ``llm`` adapter (the call
around the events is :func:`~dsh.providers._stream.sse_adapter`'s). Which models
of an ``openai``-type provider use it is decided by :func:`wire_format` (per model, per
provider, else by default the reasoning families on the built-in ``openai`` provider).

What is sent: ``instructions`` = the system prompt; ``input`` = the conversation as items, in order: user text and
images as a ``message`` (``input_text``, ``input_image``); assistant text as a ``message`` (``output_text``); each
tool call as a ``function_call`` (the raw argument JSON) and each result as a ``function_call_output`` right where
it stood (its text, or its ``input_text`` and ``input_image`` parts when it holds images); each stored reasoning block that carries ``encrypted_content`` as a ``reasoning`` item (its id, its
summary, the encrypted content) before the items that followed it. ``store: false`` (nothing kept at OpenAI, so the
encrypted reasoning travels with the request). Tools as ``{type: function, name, description, parameters,
strict}`` (``strict`` false unless the tool says so: the Responses API would otherwise make every schema strict)
with ``parallel_tool_calls: true``. For a reasoning model: ``reasoning: {summary: auto}`` (plus ``effort`` from the
thought level, through ``extra``) and ``include: ["reasoning.encrypted_content"]``. ``max_output_tokens`` (the
request's, else the provider's), ``temperature`` only when set; ``extra`` merged last (its ``reasoning`` merged into
ours; a Chat-style ``reasoning_effort`` becomes ``reasoning.effort``).

What is streamed: ``response.output_text.delta`` → ``text-delta``; reasoning summary deltas → ``reasoning-delta``
(shown as thoughts; a blank line between summary parts); at the end of a reasoning item, a ``block-end`` with the
whole reasoning block ``{type: reasoning, text: <summary>, id, encrypted_content}``, stored in the session and sent
back on later requests; a function call → ``tool-call-delta`` pieces under its ``call_id``. Then one ``usage``
(``cached_tokens`` as cache reads, ``reasoning_tokens``) and one ``finish``: ``response.completed`` → tool-calls
when the model called tools, else stop; ``response.incomplete`` for ``max_output_tokens`` → max-tokens (content
filter → error ``CONTENT_FILTER``); ``response.failed`` or an ``error`` event raise ``LlmError`` (code
``CONTEXT_WINDOW_EXCEEDED`` for ``context_length_exceeded``, so compaction's overflow path applies); a stream that
ends without a terminal event raises ``STREAM_INTERRUPTED``. An aborted call ends with ``finish`` ``aborted``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from dsh.providers._reasoning import OPENAI_PREFIXES
from dsh.providers._stream import bearer, sse_adapter
from dsh.services.llm import Adapter, FinishReason, GenerateRequest, Message, StreamChunk, Usage

if TYPE_CHECKING:
    from dsh.providers._http import Endpoint, HttpProvider
    from dsh.providers._settings import ProviderSettings

__all__ = ["RESPONSES_FAMILIES", "build_body", "responses_adapter", "to_input", "wire_format"]

ENCRYPTED = "encrypted_content"
RESPONSES_FAMILIES = OPENAI_PREFIXES
"""OpenAI's reasoning families (``o1``, ``o3``, ``o4``, ``gpt-5``): on the built-in ``openai`` provider they use the
Responses API by default (their reasoning is carried between the calls of a turn only there)."""


def wire_format(provider: str, settings: ProviderSettings, model: str) -> str:
    """Which wire format serves ``<provider>:<model>`` (``openai`` type; see ``ProviderSettings.wire_format``)."""
    if settings.type != "openai":
        return "chat-completions"
    configured = settings.wire_formats.get(model) or settings.wire_format
    if configured is not None:
        return configured
    return "responses" if provider == "openai" and model.startswith(RESPONSES_FAMILIES) else "chat-completions"


def _tool_output(block: dict[str, Any]) -> str | list[dict[str, Any]]:
    """A tool result's ``output``: its text, or, when it holds images, its parts in order (``input_text``,
    ``input_image``: the Responses API takes images in a function call's output, RFC 0022)."""
    items = block.get("content") or []
    if not any(item.get("type") == "image" for item in items):
        return "".join(item["text"] for item in items if item.get("type") == "text")
    parts: list[dict[str, Any]] = []
    for item in items:
        if item.get("type") == "text" and item.get("text"):
            parts.append({"type": "input_text", "text": item["text"]})
        elif item.get("type") == "image":
            parts.append({"type": "input_image", "image_url": item["url"]})
    return parts


def _reasoning_item(block: dict[str, Any]) -> dict[str, Any] | None:
    encrypted = block.get(ENCRYPTED)
    if not isinstance(encrypted, str) or not encrypted:
        return None  # another provider's reasoning (or none to carry): the Responses API cannot take it
    text = block.get("text") or ""
    item: dict[str, Any] = {"type": "reasoning", "summary": [{"type": "summary_text", "text": text}] if text else []}
    if isinstance(block.get("id"), str):
        item["id"] = block["id"]
    item[ENCRYPTED] = encrypted
    return item


def _assistant_items(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An assistant message as items: its text runs as ``message`` items, its reasoning and calls in place."""
    items: list[dict[str, Any]] = []
    text: list[str] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            text.append(block["text"])
            continue
        item: dict[str, Any] | None = None
        if kind == "reasoning":
            item = _reasoning_item(block)
        elif kind == "tool-call":
            arguments = block.get("arguments") or "{}"
            item = {"type": "function_call", "call_id": block["id"], "name": block["name"], "arguments": arguments}
        if item is not None:
            if text:
                items.append(_assistant_text("".join(text)))
                text = []
            items.append(item)
    if text:
        items.append(_assistant_text("".join(text)))
    return items


def _assistant_text(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def to_input(messages: list[Message]) -> list[dict[str, Any]]:
    """The ``input`` items for a conversation (see the module docstring)."""
    items: list[dict[str, Any]] = []
    for message in messages:
        blocks: list[dict[str, Any]] = [dict(b) for b in message["content"]]
        if message["role"] == "assistant":
            items.extend(_assistant_items(blocks))
            continue
        parts: list[dict[str, Any]] = []
        for block in blocks:
            kind = block.get("type")
            if kind == "tool-result":
                items.append(
                    {"type": "function_call_output", "call_id": block["tool_call_id"], "output": _tool_output(block)}
                )
            elif kind == "text":
                parts.append({"type": "input_text", "text": block["text"]})
            elif kind == "image":
                parts.append({"type": "input_image", "image_url": block["url"]})
        if parts:
            items.append({"type": "message", "role": "user", "content": parts})
    return items


def is_reasoning_model(model: str) -> bool:
    return model.startswith(OPENAI_PREFIXES)


def build_body(request: GenerateRequest, model: str, max_tokens: int | None) -> dict[str, Any]:
    """The JSON body of a streaming Responses request."""
    body: dict[str, Any] = {"model": model, "input": to_input(request.messages), "stream": True, "store": False}
    if request.system:
        body["instructions"] = request.system
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "name": tool["name"],
                "description": tool["description"],
                "parameters": tool["parameters"],
                "strict": bool(tool.get("strict", False)),
            }
            for tool in request.tools
        ]
        body["parallel_tool_calls"] = True
    extra = dict(request.extra)
    reasoning: dict[str, Any] = {"summary": "auto"} if is_reasoning_model(model) else {}
    effort = extra.pop("reasoning_effort", None)
    if isinstance(effort, str):
        reasoning["effort"] = effort
    asked = extra.pop("reasoning", None)
    if isinstance(asked, dict):
        reasoning.update(asked)
    if reasoning:
        body["reasoning"] = reasoning
        body["include"] = ["reasoning.encrypted_content"]
    if request.temperature is not None:
        body["temperature"] = request.temperature
    limit = request.max_tokens or max_tokens
    if limit:
        body["max_output_tokens"] = limit
    body.update(extra)
    return body


def _usage(raw: dict[str, Any]) -> Usage:
    usage: Usage = {}
    for key in ("input_tokens", "output_tokens", "total_tokens"):
        if isinstance(raw.get(key), int):
            usage[key] = raw[key]
    cached = (raw.get("input_tokens_details") or {}).get("cached_tokens")
    if isinstance(cached, int):
        usage["cache_read_tokens"] = cached
    reasoning = (raw.get("output_tokens_details") or {}).get("reasoning_tokens")
    if isinstance(reasoning, int):
        usage["reasoning_tokens"] = reasoning
    return usage


def _error_code(code: Any) -> str:
    return "CONTEXT_WINDOW_EXCEEDED" if code == "context_length_exceeded" else "PROVIDER_ERROR"


class _Items:
    """What the stream said about each output item, by output index (and item id)."""

    __slots__ = ("arguments", "calls", "summary_parts")

    def __init__(self) -> None:
        self.calls: dict[str, str] = {}
        """Item id (or ``#<output index>``) → the call id of a function call."""
        self.arguments: dict[str, bool] = {}
        """Call id → whether argument deltas were streamed."""
        self.summary_parts: dict[str, int] = {}

    @staticmethod
    def key(payload: dict[str, Any]) -> str:
        item_id = payload.get("item_id")
        return str(item_id) if item_id else f"#{payload.get('output_index')}"


class _Decoder:
    """One Responses call's events: text, reasoning summaries, function calls by output item; done at
    ``response.completed`` / ``response.incomplete``."""

    unfinished = "the response completed"

    def __init__(self, http: HttpProvider, endpoint: Endpoint) -> None:
        self._http = http
        self._key = endpoint.api_key
        self._items = _Items()
        self._finish: FinishReason | None = None
        self._usage: Usage | None = None
        self.done = False

    def feed(self, event: str, payload: dict[str, Any]) -> Iterator[StreamChunk]:
        items = self._items
        kind = payload.get("type") or event
        if kind == "response.output_text.delta":
            if payload.get("delta"):
                yield {"type": "text-delta", "text": str(payload["delta"])}
        elif kind == "response.reasoning_summary_text.delta":
            if payload.get("delta"):
                yield {"type": "reasoning-delta", "text": str(payload["delta"])}
        elif kind == "response.reasoning_summary_part.added":
            key = items.key(payload)
            count = items.summary_parts.get(key, 0)
            items.summary_parts[key] = count + 1
            if count:
                yield {"type": "reasoning-delta", "text": "\n\n"}
        elif kind == "response.output_item.added":
            item = payload.get("item") or {}
            if item.get("type") == "function_call":
                call_id = str(item.get("call_id") or item.get("id") or f"call_{payload.get('output_index')}")
                items.calls[str(item.get("id") or "")] = call_id
                items.calls[f"#{payload.get('output_index')}"] = call_id
                yield {
                    "type": "tool-call-delta",
                    "id": call_id,
                    "name": str(item.get("name") or ""),
                    "arguments_delta": "",
                }
        elif kind == "response.function_call_arguments.delta":
            target = items.calls.get(items.key(payload)) or items.calls.get(f"#{payload.get('output_index')}")
            if target is not None and payload.get("delta"):
                items.arguments[target] = True
                yield {"type": "tool-call-delta", "id": target, "arguments_delta": str(payload["delta"])}
        elif kind == "response.output_item.done":
            item = payload.get("item") or {}
            if item.get("type") == "reasoning":
                summary = "\n\n".join(
                    str(part.get("text") or "") for part in item.get("summary") or [] if isinstance(part, dict)
                )
                block: dict[str, Any] = {"type": "reasoning", "text": summary}
                if item.get("id"):
                    block["id"] = str(item["id"])
                if isinstance(item.get(ENCRYPTED), str):
                    block[ENCRYPTED] = item[ENCRYPTED]
                yield {"type": "block-end", "block": block}  # type: ignore[typeddict-item]
            elif item.get("type") == "function_call":
                call_id = str(item.get("call_id") or items.calls.get(str(item.get("id") or "")) or "")
                if call_id and not items.arguments.get(call_id) and item.get("arguments"):
                    items.arguments[call_id] = True
                    yield {"type": "tool-call-delta", "id": call_id, "arguments_delta": str(item["arguments"])}
        elif kind in ("response.completed", "response.incomplete"):
            response = payload.get("response") or {}
            if isinstance(response.get("usage"), dict):
                self._usage = _usage(response["usage"])
            self._finish = _finish(kind, response, bool(items.calls), self._http.name)
            self.done = True
        elif kind == "response.failed":
            error = (payload.get("response") or {}).get("error") or {}
            message = error.get("message") if isinstance(error, dict) else str(error)
            code = error.get("code") if isinstance(error, dict) else None
            raise self._http.error(f"the response failed: {message}", _error_code(code), self._key)
        elif kind == "error":
            message = payload.get("message") or (payload.get("error") or {}).get("message") or _compact(payload)[:200]
            code = payload.get("code") or (payload.get("error") or {}).get("code")
            raise self._http.error(f"error in the stream: {message}", _error_code(code), self._key)

    def finish(self) -> FinishReason | None:
        return self._finish

    def usage(self) -> Usage | None:
        return self._usage


def _compact(payload: dict[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


def responses_adapter(http: HttpProvider) -> Adapter:
    """An adapter serving ``<provider>:<model>`` over the Responses API through *http*."""
    return sse_adapter(http, "/responses", bearer, build_body, lambda endpoint: _Decoder(http, endpoint))


def _finish(kind: str, response: dict[str, Any], called: bool, provider: str) -> FinishReason:
    if kind == "response.incomplete":
        reason = (response.get("incomplete_details") or {}).get("reason")
        if reason == "content_filter":
            return {
                "kind": "error",
                "message": f"{provider}: the provider's content filter stopped the answer; rephrase the request or "
                "use another model",
                "code": "CONTENT_FILTER",
            }
        return {"kind": "max-tokens"}
    return {"kind": "tool-calls"} if called else {"kind": "stop"}
