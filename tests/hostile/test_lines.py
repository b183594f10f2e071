"""The MCP transport's line splitting and the id rescue of a line it cannot use (issue #30 item 4), as units."""

from __future__ import annotations

import time
import tracemalloc

from dsh.mcp._lines import HEAD, LineSplitter
from dsh.mcp._stdio import answer_id


def test_lines_split_across_chunks_and_cut_past_the_limit_keep_both_ends() -> None:
    lines = LineSplitter(10)
    assert lines.feed(b"ab") == []
    (first,) = lines.feed(b"c\nde")
    assert first.data == b"abc" and not first.cut
    (long,) = lines.feed(b"f" * 30 + b"TAIL\n")
    assert long.cut and long.size == 36 and long.data == b"def" + b"f" * 7 and long.tail.endswith(b"TAIL")
    assert lines.feed(b"last") == [] and lines.close() is not None


def test_a_line_without_newline_costs_memory_up_to_the_in_memory_part_and_linear_time() -> None:
    lines = LineSplitter(8 << 20, memory=64 << 10)
    chunk = b"x" * 65536
    tracemalloc.start()
    started = time.perf_counter()
    try:
        for _ in range(2048):  # 128 MiB without a newline
            assert lines.feed(chunk) == []
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    elapsed = time.perf_counter() - started
    (line,) = lines.feed(b"\n")
    assert line.cut and line.size == 128 << 20 and len(line.data) == HEAD
    assert peak < 2 << 20, peak  # the in-memory part and a chunk, not the line
    assert elapsed < 5.0, elapsed  # linear: the quadratic buffer took minutes for this


def test_answer_ids_are_read_from_either_end_and_never_from_a_servers_own_request() -> None:
    assert answer_id(b'{"jsonrpc":"2.0","id":7,"result":{"x":[[[[[') == 7
    assert answer_id(b'{"jsonrpc": "2.0", "id": "a-1", "error": {') == "a-1"
    assert answer_id(b'{"result":{"deep":[[[', b'[]]]},"jsonrpc":"2.0","id":12}') == 12
    assert answer_id(b'{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{') is None
    assert answer_id(b'{"jsonrpc":"2.0","method":"notifications/message","params":{') is None
    assert answer_id(b'{"jsonrpc":"2.0","result":{"id":5}}') is None  # an id inside the result is not its id
    assert answer_id(b"xxxxxxxx") is None
