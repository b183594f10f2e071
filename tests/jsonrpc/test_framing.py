"""The sans-IO newline framer of every JSON-RPC end of dsh: the same lines for every split of the stream, bounded
memory, resync, and an oversized line's size and ends (its id is read from them)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import TypeAlias

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh.jsonrpc import HEAD, MAX_LINE, TAIL, LineFramer, Oversized

Frame: TypeAlias = bytes | Oversized

frame_bytes = st.binary(max_size=40).map(lambda raw: raw.replace(b"\n", b""))


def split_at(stream: bytes, cuts: Sequence[int]) -> list[bytes]:
    """*stream* cut at the given offsets (duplicates and unsorted offsets allowed; empty chunks kept)."""
    points = [0, *sorted(cuts), len(stream)]
    return [stream[a:b] for a, b in pairwise(points)]


def run(framer: LineFramer, chunks: Sequence[bytes], *, close: bool = True) -> list[Frame]:
    out: list[Frame] = []
    for chunk in chunks:
        out.extend(framer.feed(chunk))
    if close:
        out.extend(framer.close())
    return out


def marker(frame: bytes, limit: int) -> Oversized:
    """What the framer must report for the oversized *frame*: its size, first HEAD and last TAIL bytes."""
    return Oversized(len(frame), frame[:HEAD], frame[-TAIL:], limit)


def expected(frames: Sequence[bytes], max_frame: int) -> list[Frame]:
    return [frame if len(frame) <= max_frame else marker(frame, max_frame) for frame in frames]


@st.composite
def stream_and_cuts(draw: st.DrawFn, frames: st.SearchStrategy[list[bytes]]) -> tuple[list[bytes], bytes, list[int]]:
    chosen = draw(frames)
    stream = b"".join(frame + b"\n" for frame in chosen)
    cuts = draw(st.lists(st.integers(0, len(stream)), max_size=30))
    return chosen, stream, cuts


# -- every split yields the same frames ---------------------------------------------------------------


@given(stream_and_cuts(st.lists(frame_bytes, max_size=20)))
def test_every_split_yields_the_same_frames(case: tuple[list[bytes], bytes, list[int]]) -> None:
    frames, stream, cuts = case
    out = run(LineFramer(), split_at(stream, cuts))
    assert out == frames
    assert all(type(frame) is bytes for frame in out)


@given(st.lists(frame_bytes, min_size=1, max_size=20), st.data())
def test_a_final_frame_without_newline_comes_out_of_close(frames: list[bytes], data: st.DataObject) -> None:
    stream = b"\n".join(frames)
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=30))
    framer = LineFramer()
    fed: list[Frame] = []
    for chunk in split_at(stream, cuts):
        fed.extend(framer.feed(chunk))
    assert fed == frames[:-1]
    closed = framer.close()
    assert closed == ([frames[-1]] if frames[-1] else [])
    assert framer.close() == []  # close is idempotent: nothing is produced twice


def test_frames_keep_a_trailing_carriage_return_and_empty_lines() -> None:
    assert run(LineFramer(), [b'{"a":1}\r\n\n  \nx']) == [b'{"a":1}\r', b"", b"  ", b"x"]


def test_returned_frames_do_not_alias_the_internal_buffer() -> None:
    framer = LineFramer()
    framer.feed(b"abc")
    (first,) = framer.feed(b"def\n")
    framer.feed(b"zzzzzz")
    assert first == b"abcdef"


def test_the_one_limit_allows_at_least_64_mib_and_is_the_default() -> None:
    assert MAX_LINE >= 64 * 1024 * 1024
    framer = LineFramer()
    assert framer.feed(b"a" * MAX_LINE + b"\n") == [b"a" * MAX_LINE]
    assert framer.feed(b"b" * (MAX_LINE + 1) + b"\n") == [Oversized(MAX_LINE + 1, b"b" * HEAD, b"b" * TAIL)]


# -- oversized frames -----------------------------------------------------------------------------------

MAX = 16


@settings(max_examples=300)
@given(stream_and_cuts(st.lists(st.binary(max_size=3 * MAX).map(lambda b: b.replace(b"\n", b"")), max_size=12)))
def test_oversized_frames_yield_one_marker_each_for_every_split(case: tuple[list[bytes], bytes, list[int]]) -> None:
    frames, stream, cuts = case
    assert run(LineFramer(MAX), split_at(stream, cuts)) == expected(frames, MAX)


@given(st.lists(st.binary(max_size=3 * MAX).map(lambda b: b.replace(b"\n", b"")), min_size=1, max_size=12), st.data())
def test_an_oversized_final_frame_without_newline_is_reported_by_close(
    frames: list[bytes], data: st.DataObject
) -> None:
    stream = b"\n".join(frames)
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=30))
    framer = LineFramer(MAX)
    out = run(framer, split_at(stream, cuts))
    last = frames[-1]
    want = expected(frames[:-1], MAX) + ([last if len(last) <= MAX else marker(last, MAX)] if last else [])
    assert out == want


def test_a_frame_of_exactly_max_bytes_is_a_frame_and_one_more_byte_is_oversized() -> None:
    framer = LineFramer(MAX)
    assert framer.feed(b"a" * MAX + b"\n") == [b"a" * MAX]
    assert framer.feed(b"b" * (MAX + 1) + b"\n") == [marker(b"b" * (MAX + 1), MAX)]
    assert framer.feed(b"c\n") == [b"c"]


def test_oversized_frame_in_one_chunk_then_resync() -> None:
    framer = LineFramer(MAX)
    big = b"x" * 1000
    assert framer.feed(b"ok\n" + big + b"\nnext\n") == [b"ok", marker(big, MAX), b"next"]
    assert framer.close() == []


def test_oversized_frame_in_many_chunks_then_resync() -> None:
    framer = LineFramer(MAX)
    out: list[Frame] = []
    out += framer.feed(b"ok\nxxxx")
    for _ in range(250):
        out += framer.feed(b"xxxx")
    out += framer.feed(b"xx\nne")
    out += framer.feed(b"xt\n")
    assert out == [b"ok", marker(b"x" * (4 + 250 * 4 + 2), MAX), b"next"]
    assert framer.close() == []


def test_memory_stays_bounded_while_a_huge_frame_arrives_in_small_chunks() -> None:
    max_frame = 64 * 1024
    chunk = b"y" * 4096
    framer = LineFramer(max_frame)
    total = 0
    for _ in range(10 * 1024 * 1024 // len(chunk)):  # a 10 MiB frame
        assert framer.feed(chunk) == []
        total += len(chunk)
        assert len(framer._buffer) <= max_frame + len(chunk)
    assert framer.feed(b"\n{}\n") == [marker(b"y" * total, max_frame), b"{}"]
    assert len(framer._buffer) == 0


def test_memory_stays_bounded_when_a_huge_frame_arrives_in_one_chunk() -> None:
    max_frame = 1024
    framer = LineFramer(max_frame)
    huge = b"z" * (4 * 1024 * 1024)
    assert framer.feed(huge) == []
    assert len(framer._buffer) <= max_frame
    assert framer.feed(huge + b"\n") == [marker(huge + huge, max_frame)]
    assert framer.feed(b"after\n") == [b"after"]


@settings(max_examples=200)
@given(st.data())
def test_an_oversized_lines_ends_are_kept_exactly_for_every_split(data: st.DataObject) -> None:
    """The ends are what the id is read from: for any split, the first HEAD and last TAIL bytes of the line."""
    size = data.draw(st.integers(MAX + 1, 3 * HEAD))
    line = bytes((index * 7 + 3) % 251 for index in range(size)).replace(b"\n", b"#")
    stream = b"first\n" + line + b"\nafter\n"
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=12))
    assert run(LineFramer(MAX), split_at(stream, cuts)) == [b"first", marker(line, MAX), b"after"]
