"""``BlockAssembler``: a chunk stream in, an assistant message (plus usage and finish) out."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from dsh.services.llm import BlockAssembler, GenerateResult, StreamChunk


def assemble(*chunks: Any) -> BlockAssembler:
    assembler = BlockAssembler()
    for chunk in chunks:
        assembler.feed(chunk)
    return assembler


def blocks(*chunks: Any) -> list[dict[str, Any]]:
    content: Any = assemble(*chunks).message()["content"]
    return list(content)


def text(piece: str) -> StreamChunk:
    return {"type": "text-delta", "text": piece}


def reasoning(piece: str) -> StreamChunk:
    return {"type": "reasoning-delta", "text": piece}


def call(call_id: str, arguments: str, name: str | None = None) -> StreamChunk:
    chunk: dict[str, Any] = {"type": "tool-call-delta", "id": call_id, "arguments_delta": arguments}
    if name is not None:
        chunk["name"] = name
    return chunk  # type: ignore[return-value]


def end(block: dict[str, Any]) -> StreamChunk:
    return {"type": "block-end", "block": block}  # type: ignore[typeddict-item]


# -- deltas -------------------------------------------------------------------------------------------------


def test_empty_assembler_yields_an_empty_assistant_message() -> None:
    assembler = BlockAssembler()

    assert assembler.message() == {"role": "assistant", "content": []}
    assert (assembler.usage, assembler.finish) == (None, None)


def test_consecutive_text_deltas_merge_into_one_text_block() -> None:
    assert blocks(text("Hel"), text("lo "), text("world")) == [{"type": "text", "text": "Hello world"}]


def test_consecutive_reasoning_deltas_merge_into_one_reasoning_block() -> None:
    assert blocks(reasoning("think"), reasoning("ing")) == [{"type": "reasoning", "text": "thinking"}]


def test_interleaved_text_reasoning_text_yields_three_blocks_in_order() -> None:
    assert blocks(text("a"), text("b"), reasoning("r"), text("c")) == [
        {"type": "text", "text": "ab"},
        {"type": "reasoning", "text": "r"},
        {"type": "text", "text": "c"},
    ]


def test_tool_call_deltas_are_grouped_by_id_with_arguments_concatenated() -> None:
    assert blocks(call("c1", '{"a"', name="read"), call("c1", ": 1"), call("c1", "}")) == [
        {"type": "tool-call", "id": "c1", "name": "read", "arguments": '{"a": 1}'}
    ]


def test_interleaved_tool_calls_keep_the_order_of_first_appearance() -> None:
    assert blocks(
        call("c1", "{", name="first"),
        call("c2", "[", name="second"),
        call("c1", "}"),
        call("c2", "]"),
    ) == [
        {"type": "tool-call", "id": "c1", "name": "first", "arguments": "{}"},
        {"type": "tool-call", "id": "c2", "name": "second", "arguments": "[]"},
    ]


def test_tool_call_name_may_arrive_on_a_later_delta() -> None:
    assert blocks(call("c1", "{"), call("c1", "}", name="late")) == [
        {"type": "tool-call", "id": "c1", "name": "late", "arguments": "{}"}
    ]


def test_tool_call_name_is_kept_when_later_deltas_omit_it() -> None:
    [block] = blocks(call("c1", "", name="kept"), call("c1", "{}"), call("c1", "", name=""))

    assert block["name"] == "kept"


def test_text_after_a_tool_call_starts_a_new_text_block() -> None:
    assert blocks(text("before "), call("c1", "{}", name="t"), text("after")) == [
        {"type": "text", "text": "before "},
        {"type": "tool-call", "id": "c1", "name": "t", "arguments": "{}"},
        {"type": "text", "text": "after"},
    ]


# -- block-end ----------------------------------------------------------------------------------------------


def test_block_end_replaces_the_open_text_block() -> None:
    assert blocks(text("draf"), text("t"), end({"type": "text", "text": "final"})) == [
        {"type": "text", "text": "final"}
    ]


def test_block_end_replaces_the_open_reasoning_block() -> None:
    assert blocks(text("t"), reasoning("partial"), end({"type": "reasoning", "text": "whole"})) == [
        {"type": "text", "text": "t"},
        {"type": "reasoning", "text": "whole"},
    ]


def test_block_end_closes_the_block_so_the_next_text_delta_starts_a_new_one() -> None:
    assert blocks(text("one"), end({"type": "text", "text": "one"}), text("two")) == [
        {"type": "text", "text": "one"},
        {"type": "text", "text": "two"},
    ]


def test_block_end_with_no_open_block_is_appended() -> None:
    ended = {"type": "reasoning", "text": "signed", "signature": "sig"}

    assert blocks(end(ended)) == [ended]


def test_block_end_of_another_type_than_the_open_block_is_appended() -> None:
    assert blocks(text("t"), end({"type": "reasoning", "text": "r"})) == [
        {"type": "text", "text": "t"},
        {"type": "reasoning", "text": "r"},
    ]


def test_block_end_replaces_the_tool_call_with_the_same_id_in_place() -> None:
    final = {"type": "tool-call", "id": "c1", "name": "read", "arguments": '{"ok": true}'}

    assert blocks(call("c1", '{"o', name="read"), call("c2", "{}", name="other"), end(final)) == [
        final,
        {"type": "tool-call", "id": "c2", "name": "other", "arguments": "{}"},
    ]


def test_tool_call_block_end_with_an_unknown_id_is_appended() -> None:
    final = {"type": "tool-call", "id": "new", "name": "t", "arguments": "{}"}

    assert blocks(call("c1", "{}", name="t"), end(final)) == [
        {"type": "tool-call", "id": "c1", "name": "t", "arguments": "{}"},
        final,
    ]


def test_block_end_replaces_the_open_block_even_when_an_earlier_block_is_equal() -> None:
    assert blocks(text("a"), reasoning("r"), text("a"), end({"type": "text", "text": "a!"})) == [
        {"type": "text", "text": "a"},
        {"type": "reasoning", "text": "r"},
        {"type": "text", "text": "a!"},
    ]


def test_block_end_block_is_copied_so_later_mutation_of_the_chunk_does_not_leak() -> None:
    block: dict[str, Any] = {"type": "text", "text": "final"}
    assembler = assemble(end(block))

    block["text"] = "mutated"

    assert assembler.message()["content"] == [{"type": "text", "text": "final"}]


# -- usage and finish ---------------------------------------------------------------------------------------


def test_usage_and_finish_are_recorded_and_not_turned_into_blocks() -> None:
    assembler = assemble(
        text("hi"),
        {"type": "usage", "usage": {"input_tokens": 3, "output_tokens": 1}},
        {"type": "finish", "reason": {"kind": "stop"}},
    )

    assert assembler.message()["content"] == [{"type": "text", "text": "hi"}]
    assert assembler.usage == {"input_tokens": 3, "output_tokens": 1}
    assert assembler.finish == {"kind": "stop"}


def test_usage_and_finish_between_text_deltas_do_not_split_the_text_block() -> None:
    assert blocks(text("a"), {"type": "usage", "usage": {"output_tokens": 1}}, text("b")) == [
        {"type": "text", "text": "ab"}
    ]


def test_result_bundles_message_usage_and_finish() -> None:
    reason = {"kind": "error", "message": "boom", "code": "E"}
    result = assemble(
        text("x"), {"type": "usage", "usage": {"output_tokens": 1}}, {"type": "finish", "reason": reason}
    ).result()

    assert isinstance(result, GenerateResult)
    assert result.message == {"role": "assistant", "content": [{"type": "text", "text": "x"}]}
    assert result.usage == {"output_tokens": 1}
    assert result.finish == reason


# -- isolation ----------------------------------------------------------------------------------------------


def test_message_returns_fresh_dicts_that_do_not_alias_the_assembler() -> None:
    assembler = assemble(text("keep"), call("c1", "{}", name="t"))

    first: Any = assembler.message()
    first["content"][0]["text"] = "changed"
    first["content"][1]["arguments"] = "changed"
    first["content"].append({"type": "text", "text": "extra"})

    assert assembler.message()["content"] == [
        {"type": "text", "text": "keep"},
        {"type": "tool-call", "id": "c1", "name": "t", "arguments": "{}"},
    ]


def test_message_taken_mid_stream_is_not_updated_by_later_deltas() -> None:
    assembler = assemble(text("early"))
    snapshot = assembler.message()

    assembler.feed(text(" late"))

    assert snapshot["content"] == [{"type": "text", "text": "early"}]
    assert assembler.message()["content"] == [{"type": "text", "text": "early late"}]


# -- properties ---------------------------------------------------------------------------------------------

_deltas = st.lists(st.tuples(st.sampled_from(["text", "reasoning"]), st.text(max_size=5)), max_size=30)


@given(_deltas)
def test_text_and_reasoning_are_preserved_and_adjacent_blocks_differ_in_type(deltas: list[tuple[str, str]]) -> None:
    assembler = BlockAssembler()
    for kind, piece in deltas:
        assembler.feed(text(piece) if kind == "text" else reasoning(piece))

    content: list[Any] = list(assembler.message()["content"])
    for kind in ("text", "reasoning"):
        assert "".join(b["text"] for b in content if b["type"] == kind) == "".join(
            piece for k, piece in deltas if k == kind
        )
    assert all(a["type"] != b["type"] for a, b in itertools.pairwise(content))
    expected_runs = [kind for index, (kind, _) in enumerate(deltas) if index == 0 or deltas[index - 1][0] != kind]
    assert [b["type"] for b in content] == expected_runs
