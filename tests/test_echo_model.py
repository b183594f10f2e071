"""The ``echo`` model: the last user message streamed back word by word, then usage and ``finish`` ``stop``."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh.kernel import CancelToken, Context
from dsh.providers._words import WORD_BLOCK, word_blocks, words
from dsh.providers.echo import echo_stream
from dsh.services.agents import AgentOptions
from dsh.services.llm import GenerateRequest, Message, StreamChunk


def user(text: str) -> Message:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def assistant(text: str) -> Message:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


async def collect(ctx: Context, messages: list[Message], signal: CancelToken | None = None) -> list[StreamChunk]:
    stream = await ctx.llm.stream(GenerateRequest(model="echo", messages=messages, signal=signal))
    return [chunk async for chunk in stream]


async def collect_direct(text: str) -> list[StreamChunk]:
    return [chunk async for chunk in echo_stream(GenerateRequest(model="echo", messages=[user(text)]))]


def deltas(chunks: list[StreamChunk]) -> list[str]:
    raw: list[Any] = chunks
    return [chunk["text"] for chunk in raw if chunk["type"] == "text-delta"]


def types(chunks: list[StreamChunk]) -> list[str]:
    return [chunk["type"] for chunk in chunks]


# -- through the llm service --------------------------------------------------------------------------------


async def test_echo_streams_one_delta_per_word_then_usage_then_stop(core: Context) -> None:
    chunks = await collect(core, [user("hello big world")])

    assert deltas(chunks) == ["hello ", "big ", "world"]
    assert types(chunks) == ["text-delta"] * 3 + ["usage", "finish"]
    assert chunks[-1] == {"type": "finish", "reason": {"kind": "stop"}}


@pytest.mark.parametrize(
    "text",
    ["  leading", "trailing  ", "two  spaces", "line\nbreak\n", "\ttab\t and \r\n crlf ", "   ", "one"],
)
async def test_echo_deltas_concatenate_exactly_to_the_text(core: Context, text: str) -> None:
    chunks = await collect(core, [user(text)])

    assert "".join(deltas(chunks)) == text


async def test_echo_emits_exactly_one_usage_chunk_before_finish_and_nothing_after(core: Context) -> None:
    chunks = await collect(core, [user("a b c")])

    usages = [index for index, chunk in enumerate(chunks) if chunk["type"] == "usage"]
    finishes = [index for index, chunk in enumerate(chunks) if chunk["type"] == "finish"]
    assert len(usages) == 1
    assert finishes == [len(chunks) - 1]
    assert usages[0] == len(chunks) - 2
    usage: Any = chunks[usages[0]]
    assert all(isinstance(value, int) for value in usage["usage"].values())


async def test_echo_answers_the_last_user_message_not_an_earlier_one(core: Context) -> None:
    chunks = await collect(core, [user("first"), assistant("reply"), user("second one")])

    assert "".join(deltas(chunks)) == "second one"


async def test_echo_skips_trailing_assistant_messages_to_find_the_last_user_message(core: Context) -> None:
    chunks = await collect(core, [user("question here"), assistant("an answer")])

    assert "".join(deltas(chunks)) == "question here"


@pytest.mark.parametrize(
    "messages",
    [[], [assistant("only the assistant spoke")], [user("")]],
    ids=["no-messages", "no-user-message", "empty-user-message"],
)
async def test_echo_without_user_text_streams_no_deltas_but_still_usage_and_stop(
    core: Context, messages: list[Message]
) -> None:
    chunks = await collect(core, messages)

    assert types(chunks) == ["usage", "finish"]
    assert chunks[-1] == {"type": "finish", "reason": {"kind": "stop"}}


async def test_echo_is_deterministic_for_the_same_request(core: Context) -> None:
    messages = [user("same  words\nagain ")]

    assert await collect(core, messages) == await collect(core, messages)


async def test_echo_with_an_already_aborted_signal_finishes_aborted(core: Context) -> None:
    signal = CancelToken()
    signal.abort()

    chunks = await collect(core, [user("never streamed")], signal)

    assert deltas(chunks) == []
    assert chunks[-1] == {"type": "finish", "reason": {"kind": "aborted"}}
    assert types(chunks).count("finish") == 1


async def test_echo_with_an_already_aborted_signal_and_no_text_finishes_aborted(core: Context) -> None:
    signal = CancelToken()
    signal.abort()

    chunks = await collect(core, [user("")], signal)

    assert chunks[-1] == {"type": "finish", "reason": {"kind": "aborted"}}


async def test_echo_is_the_model_registered_by_the_echo_plugin(core: Context) -> None:
    assert "echo" in core.llm.models()
    assert core.llm.resolve("echo") is echo_stream


# -- end to end through an agent ----------------------------------------------------------------------------


async def test_agent_on_echo_logs_the_prompt_back_as_the_assistant_message(core: Context) -> None:
    agent = core.agent_loop.create("a", AgentOptions(model="echo"))
    agent.send([{"type": "text", "text": "hi  there\n"}])
    with anyio.fail_after(1):
        await agent.when_idle()

    messages = [event.data for event in agent.session.events if event.type == "assistant/message"]
    assert [m["content"] for m in messages] == [[{"type": "text", "text": "hi  there\n"}]]
    end = agent.session.last("turn/end")
    assert end is not None
    assert end.data["reason"] == {"kind": "completed"}


# -- properties ---------------------------------------------------------------------------------------------

_WHITESPACE_HEAVY = st.text(alphabet=st.sampled_from(["a", "b", "é", " ", "\n", "\t", "\r", "\u00a0", "\u2003"]))


@given(text=st.one_of(st.text(), _WHITESPACE_HEAVY))
async def test_echo_deltas_reassemble_the_text_and_each_is_one_word_with_its_trailing_whitespace(text: str) -> None:
    pieces = deltas(await collect_direct(text))

    assert "".join(pieces) == text
    if not text.strip():
        assert pieces == ([text] if text else [])
        return
    assert len(pieces) == len(text.split())
    for index, piece in enumerate(pieces):
        assert len(piece.split()) == 1, piece
        if index > 0:
            assert not piece[0].isspace(), piece


@given(text=st.text())
async def test_echo_is_deterministic_for_arbitrary_text(text: str) -> None:
    assert await collect_direct(text) == await collect_direct(text)


@given(text=st.one_of(st.text(), _WHITESPACE_HEAVY), block=st.integers(min_value=1, max_value=12))
def test_word_blocks_give_the_same_pieces_as_one_split(text: str, block: int) -> None:
    """The echo model splits a long prompt a block at a time (no list of millions of pieces before its first
    chunk); the pieces, their order and their whitespace are those of splitting the whole text at once."""
    blocks = list(word_blocks(text, block))

    assert [piece for pieces in blocks for piece in pieces] == words(text)
    assert all(blocks), "no empty block"


def test_a_long_prompt_is_split_in_blocks() -> None:
    text = "word " * 40_000  # 200,000 characters

    blocks = list(word_blocks(text))

    assert len(blocks) >= 3
    assert max(len(pieces) for pieces in blocks) <= WORD_BLOCK // 5 + 1


def test_echo_skips_the_notes_the_context_plugin_writes() -> None:
    """The echo model keeps its own copy of the session note's opening (importing ``dsh.context`` would cost the
    offline model ~130 ms); this ties the copy to the one the context plugin writes (RFC 0032)."""
    from dsh.context import SESSION_NOTE_OPENING
    from dsh.providers import echo

    assert echo._SESSION_NOTE == SESSION_NOTE_OPENING
