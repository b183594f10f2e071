"""Builders for the three streaming wire formats (Chat Completions, Anthropic Messages, OpenAI Responses), as the real APIs send them (field for field, in order)."""

from __future__ import annotations

import json
from typing import Any

from tests.support.provider_server import Event

__all__ = [
    "DONE",
    "an_end",
    "an_start",
    "an_text",
    "an_text_reply",
    "an_thinking",
    "an_tool",
    "oa_chunk",
    "oa_finish",
    "oa_text_reply",
    "oa_tool_reply",
    "oa_tool_delta",
    "oa_usage",
    "rs_call",
    "rs_completed",
    "rs_created",
    "rs_reasoning",
    "rs_text",
]

# -- OpenAI Chat Completions --------------------------------------------------------------------------------------

DONE = Event("[DONE]")


def oa_chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> Event:
    return Event(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": "test-model",
            "choices": [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish}],
            **extra,
        }
    )


def oa_tool_delta(index: int, arguments: str, call_id: str | None = None, name: str | None = None) -> Event:
    call: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if call_id is not None:
        call["id"] = call_id
        call["type"] = "function"
    if name is not None:
        call["function"]["name"] = name
    return oa_chunk({"tool_calls": [call]})


def oa_finish(reason: str) -> Event:
    return oa_chunk({}, reason)


def oa_usage(prompt: int, completion: int, **details: Any) -> Event:
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    usage.update(details)
    return Event(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": "test-model",
            "choices": [],
            "usage": usage,
        }
    )


def oa_text_reply(*pieces: str, finish: str = "stop", prompt: int = 7, completion: int = 3) -> list[Event]:
    return [
        oa_chunk({"role": "assistant", "content": ""}),
        *(oa_chunk({"content": piece}) for piece in pieces),
        oa_finish(finish),
        oa_usage(prompt, completion),
        DONE,
    ]


def oa_tool_reply(call_id: str, name: str, arguments: dict[str, Any]) -> list[Event]:
    """A reply that calls one tool (*arguments* sent as one JSON piece)."""
    return [
        oa_chunk({"role": "assistant", "content": None}),
        oa_tool_delta(0, json.dumps(arguments), call_id=call_id, name=name),
        oa_finish("tool_calls"),
        oa_usage(9, 4),
        DONE,
    ]


# -- Anthropic Messages -------------------------------------------------------------------------------------------


def _an(kind: str, **fields: Any) -> Event:
    return Event({"type": kind, **fields}, event=kind)


def an_start(input_tokens: int = 11, cache_read: int = 0, cache_write: int = 0) -> Event:
    return _an(
        "message_start",
        message={
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": input_tokens,
                "cache_creation_input_tokens": cache_write,
                "cache_read_input_tokens": cache_read,
                "output_tokens": 1,
            },
        },
    )


def an_text(index: int, *pieces: str) -> list[Event]:
    return [
        _an("content_block_start", index=index, content_block={"type": "text", "text": ""}),
        *(_an("content_block_delta", index=index, delta={"type": "text_delta", "text": p}) for p in pieces),
        _an("content_block_stop", index=index),
    ]


def an_thinking(index: int, pieces: list[str], signature: str) -> list[Event]:
    return [
        _an("content_block_start", index=index, content_block={"type": "thinking", "thinking": "", "signature": ""}),
        *(_an("content_block_delta", index=index, delta={"type": "thinking_delta", "thinking": p}) for p in pieces),
        _an("content_block_delta", index=index, delta={"type": "signature_delta", "signature": signature}),
        _an("content_block_stop", index=index),
    ]


def an_tool(index: int, call_id: str, name: str, json_pieces: list[str]) -> list[Event]:
    return [
        _an(
            "content_block_start",
            index=index,
            content_block={"type": "tool_use", "id": call_id, "name": name, "input": {}},
        ),
        *(
            _an("content_block_delta", index=index, delta={"type": "input_json_delta", "partial_json": p})
            for p in json_pieces
        ),
        _an("content_block_stop", index=index),
    ]


def an_end(stop_reason: str = "end_turn", output_tokens: int = 5) -> list[Event]:
    return [
        _an(
            "message_delta",
            delta={"stop_reason": stop_reason, "stop_sequence": None},
            usage={"output_tokens": output_tokens},
        ),
        _an("message_stop"),
    ]


def an_text_reply(*pieces: str, stop_reason: str = "end_turn") -> list[Event]:
    return [an_start(), _an("ping"), *an_text(0, *pieces), *an_end(stop_reason)]


# -- OpenAI Responses ---------------------------------------------------------------------------------------------


def _rs(kind: str, **fields: Any) -> Event:
    return Event({"type": kind, **fields}, event=kind)


def rs_created() -> list[Event]:
    response = {"id": "resp_1", "object": "response", "status": "in_progress", "output": []}
    return [_rs("response.created", response=response), _rs("response.in_progress", response=response)]


def rs_reasoning(index: int, item_id: str, summary: list[str], encrypted: str) -> list[Event]:
    """A reasoning item: its summary streamed part by part, then the whole item with its encrypted content."""
    events = [
        _rs("response.output_item.added", output_index=index, item={"type": "reasoning", "id": item_id, "summary": []})
    ]
    for part_index, text in enumerate(summary):
        where = {"item_id": item_id, "output_index": index, "summary_index": part_index}
        events.append(_rs("response.reasoning_summary_part.added", **where, part={"type": "summary_text", "text": ""}))
        words = text.split(" ")
        pieces = [word + " " for word in words[:-1]] + words[-1:]
        events.extend(_rs("response.reasoning_summary_text.delta", **where, delta=piece) for piece in pieces)
        events.append(_rs("response.reasoning_summary_text.done", **where, text=text))
        events.append(_rs("response.reasoning_summary_part.done", **where, part={"type": "summary_text", "text": text}))
    item = {
        "type": "reasoning",
        "id": item_id,
        "summary": [{"type": "summary_text", "text": text} for text in summary],
        "encrypted_content": encrypted,
    }
    events.append(_rs("response.output_item.done", output_index=index, item=item))
    return events


def rs_text(index: int, item_id: str, *pieces: str) -> list[Event]:
    where = {"item_id": item_id, "output_index": index, "content_index": 0}
    text = "".join(pieces)
    message = {"type": "message", "id": item_id, "role": "assistant", "status": "in_progress", "content": []}
    done = {**message, "status": "completed", "content": [{"type": "output_text", "text": text, "annotations": []}]}
    return [
        _rs("response.output_item.added", output_index=index, item=message),
        _rs("response.content_part.added", **where, part={"type": "output_text", "text": "", "annotations": []}),
        *(_rs("response.output_text.delta", **where, delta=piece) for piece in pieces),
        _rs("response.output_text.done", **where, text=text),
        _rs("response.content_part.done", **where, part={"type": "output_text", "text": text, "annotations": []}),
        _rs("response.output_item.done", output_index=index, item=done),
    ]


def rs_call(index: int, item_id: str, call_id: str, name: str, json_pieces: list[str]) -> list[Event]:
    item = {
        "type": "function_call",
        "id": item_id,
        "call_id": call_id,
        "name": name,
        "arguments": "",
        "status": "in_progress",
    }
    arguments = "".join(json_pieces)
    return [
        _rs("response.output_item.added", output_index=index, item=item),
        *(
            _rs("response.function_call_arguments.delta", item_id=item_id, output_index=index, delta=piece)
            for piece in json_pieces
        ),
        _rs("response.function_call_arguments.done", item_id=item_id, output_index=index, arguments=arguments),
        _rs(
            "response.output_item.done",
            output_index=index,
            item={**item, "arguments": arguments, "status": "completed"},
        ),
    ]


def rs_completed(input_tokens: int = 40, output_tokens: int = 12, reasoning: int = 8, cached: int = 0) -> Event:
    usage = {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input_tokens + output_tokens,
    }
    return _rs(
        "response.completed", response={"id": "resp_1", "object": "response", "status": "completed", "usage": usage}
    )
