"""Builders for the two streaming wire formats, as the real APIs send them (field for field, in order)."""

from __future__ import annotations

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
    "oa_tool_delta",
    "oa_usage",
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
