"""The JSONL file format and crash repair as a pure function (``_format.scan``; reference §6.3)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh.plugins.persistence import CorruptSessionError
from dsh.plugins.persistence._format import ScanResult, encode_event, encode_header, scan
from dsh.services.sessions import SessionEvent, SessionHeader

from ._helpers import (
    INTERRUPTED_ERROR,
    INTERRUPTED_TEXT,
    assert_balanced,
    closed_turn,
    events_of,
    file_bytes,
    header,
    open_turn,
    text,
)

WHERE = "/data/sessions/s1.jsonl"


def head_len(head: SessionHeader) -> int:
    return len(encode_header(head))


def interrupted_result(turn: int, step: int, call_id: str) -> dict[str, Any]:
    return {
        "turn": turn,
        "step": step,
        "call_id": call_id,
        "content": [{"type": "text", "text": INTERRUPTED_TEXT}],
        "is_error": True,
        "error": INTERRUPTED_ERROR,
    }


# -- encoding -----------------------------------------------------------------------------------------------


def test_encoded_lines_are_compact_utf8_and_newline_terminated() -> None:
    """Lines are compact UTF-8 JSON (orjson); a line holding a lone surrogate, which UTF-8 cannot carry, is
    ASCII-escaped instead (the standard encoder's spelling), so every line is valid UTF-8 and lossless."""
    head = header("s1", cwd="/work/ü", parent_session="root")
    plain = SessionEvent("user/message", 0, 1.5, {"content": text('quote " newline \n nul \x00 é 😀 \u2028')})
    event = SessionEvent("user/message", 0, 1.5, {"content": text('quote " newline \n nul \x00 é 😀 \u2028 \ud800')})
    for line in (encode_header(head), encode_event(plain), encode_event(event)):
        assert line.endswith(b"\n")
        assert line.count(b"\n") == 1
        line.decode("utf-8")  # valid UTF-8, always
    compact = {"separators": (",", ":"), "ensure_ascii": False}
    assert encode_header(head) == json.dumps({"type": "session", **head.to_json()}, **compact).encode() + b"\n"  # type: ignore[arg-type]
    assert encode_event(plain) == json.dumps(plain.to_json(), **compact).encode() + b"\n"  # type: ignore[arg-type]
    assert encode_event(event).isascii()
    assert encode_event(event) == json.dumps(event.to_json(), separators=(",", ":")).encode() + b"\n"
    assert json.loads(encode_header(head)) == {
        "type": "session",
        "version": 1,
        "id": "s1",
        "created_at": 1_700_000_000.5,
        "cwd": "/work/ü",
        "parent_session": "root",
    }
    assert json.loads(encode_event(event)) == {"type": "user/message", "seq": 0, "time": 1.5, "data": event.data}


def test_a_clean_file_round_trips() -> None:
    head = header("s1", cwd="/work/project")
    events = events_of(*closed_turn(1), *closed_turn(2, "again é\n😀"))
    content = file_bytes(head, events)
    result = scan(content, WHERE)
    assert result == ScanResult(head, events, len(content), [])


def test_a_header_only_file_has_no_events_and_no_closers() -> None:
    head = header("s1")
    content = encode_header(head)
    assert scan(content, WHERE) == ScanResult(head, [], len(content), [])


# -- torn tails ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tail",
    [
        b'{"type":"assistant/chunk","seq":7,"ti',  # no newline: a partial write
        b'{"type":"turn/end","seq":7,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}',  # whole, unterminated
        b'{"type":"assistant/chunk","seq":7,"ti\n',  # unparseable last line
        b"\x00\x00\x00\x00\n",  # zero-filled block
        b'{"type":"usage","seq":7,"time":NaN,"data":{}}\n',  # NaN is not JSON
        b"\xff\xfe\n",  # not UTF-8
        b"\n",  # an empty last line
    ],
)
def test_a_torn_final_line_is_cut(tail: bytes) -> None:
    head = header("s1")
    events = events_of(*closed_turn(1))
    sound = file_bytes(head, events)
    result = scan(sound + tail, WHERE)
    assert result.keep_bytes == len(sound)
    assert result.events == events
    assert result.closers == []
    assert result.header == head


def test_a_torn_tail_right_after_the_header_leaves_no_events() -> None:
    head = header("s1")
    result = scan(encode_header(head) + b'{"type":"turn/st', WHERE)
    assert result == ScanResult(head, [], head_len(head), [])


def test_a_bad_line_before_an_unterminated_tail_is_corruption_not_a_torn_tail() -> None:
    sound = file_bytes(header("s1"), events_of(*closed_turn(1)))  # lines 1-8
    with pytest.raises(CorruptSessionError) as caught:
        scan(sound + b"garbage\n" + b'{"type":"x","seq":8', WHERE)
    assert f"{WHERE}:9:" in str(caught.value)


# -- corruption in the committed middle ---------------------------------------------------------------------


def _middle_cases() -> list[tuple[str, bytes]]:
    return [
        ("bad JSON", b'{"type":"assistant/chunk","seq":2,'),
        ("NaN", b'{"type":"step/start","seq":2,"time":NaN,"data":{"turn":1,"step":1}}'),
        ("Infinity", b'{"type":"step/start","seq":2,"time":1,"data":{"turn":1,"x":Infinity}}'),
        ("overflowing float", b'{"type":"step/start","seq":2,"time":1,"data":{"x":1e999}}'),
        ("not an object", b"[1, 2, 3]"),
        ("no data", b'{"type":"step/start","seq":2,"time":1}'),
        ("data not an object", b'{"type":"step/start","seq":2,"time":1,"data":[]}'),
        ("type not a string", b'{"type":7,"seq":2,"time":1,"data":{}}'),
        ("seq a string", b'{"type":"step/start","seq":"2","time":1,"data":{}}'),
        ("seq a boolean", b'{"type":"step/start","seq":true,"time":1,"data":{}}'),
        ("seq a float", b'{"type":"step/start","seq":2.0,"time":1,"data":{}}'),
        ("seq gap", b'{"type":"step/start","seq":3,"time":1,"data":{}}'),
        ("seq duplicate", b'{"type":"step/start","seq":1,"time":1,"data":{}}'),
        ("empty line", b""),
        ("two values on a line", b'{"type":"step/start","seq":2,"time":1,"data":{}} {"a":1}'),
        ("not UTF-8", b'{"type":"step/start","seq":2,"time":1,"data":{"t":"\xff"}}'),
    ]


@pytest.mark.parametrize(("case", "bad"), _middle_cases(), ids=[case for case, _ in _middle_cases()])
def test_a_corrupt_line_in_the_middle_names_file_and_line(case: str, bad: bytes) -> None:
    head = header("s1")
    events = events_of(*closed_turn(1))
    lines = file_bytes(head, events).split(b"\n")[:-1]
    lines[3] = bad  # line 4 of the file (seq 2), with sound lines after it
    with pytest.raises(CorruptSessionError) as caught:
        scan(b"\n".join(lines) + b"\n", WHERE)
    assert f"{WHERE}:4:" in str(caught.value)
    assert caught.value.code == "SESSION_CORRUPT"


def test_a_huge_integer_time_in_the_middle_is_corruption() -> None:
    events = events_of(*closed_turn(1))
    lines = file_bytes(header("s1"), events).split(b"\n")[:-1]
    lines[3] = b'{"type":"step/start","seq":2,"time":1' + b"0" * 400 + b',"data":{"turn":1,"step":1}}'
    with pytest.raises(CorruptSessionError, match=f"{WHERE}:4:"):
        scan(b"\n".join(lines) + b"\n", WHERE)


def test_lines_that_are_only_json_when_joined_are_corruption() -> None:
    head = header("s1")
    lines = [
        encode_header(head).rstrip(b"\n"),
        b'{"type":"t","seq":0,"time":1,"data":{"k":[1',  # line 2: not JSON on its own
        b"2]}}",  # line 3: not JSON on its own
        b'{"type":"t","seq":1,"time":1,"data":{}},{"type":"t","seq":2,"time":1,"data":{}}',  # two values
        b'{"type":"t","seq":3,"time":1,"data":{}}',
    ]
    with pytest.raises(CorruptSessionError, match=f"{WHERE}:2:"):
        scan(b"\n".join(lines) + b"\n", WHERE)


def test_a_complete_final_line_with_a_seq_gap_is_corruption() -> None:
    events = events_of(*closed_turn(1))
    sound = file_bytes(header("s1"), events)
    with pytest.raises(CorruptSessionError, match=f"{WHERE}:9:"):
        scan(sound + b'{"type":"turn/start","seq":12,"time":1,"data":{"turn":2}}\n', WHERE)


# -- headers ------------------------------------------------------------------------------------------------


def test_an_empty_file_is_an_error() -> None:
    with pytest.raises(CorruptSessionError, match="empty"):
        scan(b"", WHERE)


def test_a_header_cut_while_being_created_is_an_error() -> None:
    partial = encode_header(header("s1"))[:-5]
    with pytest.raises(CorruptSessionError) as caught:
        scan(partial, WHERE)
    assert f"{WHERE}:1:" in str(caught.value)


@pytest.mark.parametrize(
    "line",
    [
        b"not json",
        b'{"type":"session","version":1,"id":"s1","created_at":NaN}',
        b"[]",
        b'{"version":1,"id":"s1","created_at":1}',  # no type
        b'{"type":"turn/start","seq":0,"time":1,"data":{}}',  # an event where the header should be
        b'{"type":"session","version":1,"created_at":1}',  # no id
        b'{"type":"session","version":1,"id":7,"created_at":1}',
        b'{"type":"session","id":"s1","created_at":1}',  # no version
        b'{"type":"session","version":2,"id":"s1","created_at":1}',
        b'{"type":"session","version":"1","id":"s1","created_at":1}',
        b'{"type":"session","version":0,"id":"s1","created_at":1}',
        b"",
    ],
)
def test_a_bad_or_unsupported_header_is_an_error_on_line_1(line: bytes) -> None:
    rest = b"".join(encode_event(e) for e in events_of(*closed_turn(1)))
    with pytest.raises(CorruptSessionError) as caught:
        scan(line + b"\n" + rest, WHERE)
    assert f"{WHERE}:1:" in str(caught.value)


@pytest.mark.parametrize(
    "line",
    [
        b'{"type":"session","version":1,"id":"s1","created_at":"x"}',
        b'{"type":"session","version":1,"id":"s1","created_at":[1]}',
        b'{"type":"session","version":1,"id":"s1","created_at":1,"cwd":5}',
        b'{"type":"session","version":1,"id":"s1","created_at":1,"parent_session":["a"]}',
        b'{"type":"session","version":true,"id":"s1","created_at":1}',
    ],
)
def test_header_fields_of_the_wrong_type_are_an_error(line: bytes) -> None:
    with pytest.raises(CorruptSessionError, match=f"{WHERE}:1:"):
        scan(line + b"\n", WHERE)


def test_header_fields_are_read() -> None:
    head = SessionHeader(id="s1", created_at=12.25, cwd="/w", parent_session="p")
    assert scan(encode_header(head), WHERE).header == head


# -- closing an interrupted final turn ----------------------------------------------------------------------


def test_an_unclosed_turn_gets_a_result_per_open_call_then_step_end_then_turn_end() -> None:
    head = header("s1")
    events = events_of(
        *closed_turn(1),
        ("turn/start", {"turn": 2, "trigger": {"kind": "message", "source": {"kind": "user"}}}),
        ("user/message", {"content": text("go"), "source": {"kind": "user"}}),
        ("step/start", {"turn": 2, "step": 1}),
        ("tool/call", {"turn": 2, "step": 1, "call_id": "done", "name": "t", "arguments": "{}"}),
        ("tool/result", {"turn": 2, "step": 1, "call_id": "done", "content": text("ok"), "is_error": False}),
        ("step/end", {"turn": 2, "step": 1}),
        ("step/start", {"turn": 2, "step": 2}),
        ("tool/call", {"turn": 2, "step": 2, "call_id": "a", "name": "t", "arguments": "{}"}),
        ("tool/call", {"turn": 2, "step": 2, "call_id": "b", "name": "t", "arguments": "{}"}),
        ("tool/call", {"turn": 2, "step": 2, "call_id": "c", "name": "t", "arguments": "{}"}),
        ("tool/result", {"turn": 2, "step": 2, "call_id": "b", "content": text("ok"), "is_error": False}),
        ("assistant/chunk", {"turn": 2, "step": 2, "chunk": {"type": "text-delta", "text": "x"}}),
    )
    content = file_bytes(head, events)
    result = scan(content, WHERE)
    n = len(events)
    assert result.keep_bytes == len(content)
    assert [(c.type, c.seq, c.data) for c in result.closers] == [
        ("tool/result", n, interrupted_result(2, 2, "a")),
        ("tool/result", n + 1, interrupted_result(2, 2, "c")),
        ("step/end", n + 2, {"turn": 2, "step": 2}),
        ("turn/end", n + 3, {"turn": 2, "reason": {"kind": "interrupted"}}),
    ]
    assert result.events == events + result.closers
    assert_balanced(result.events)
    # appending the closers makes a file that needs no more repair
    repaired = content + b"".join(encode_event(c) for c in result.closers)
    assert scan(repaired, WHERE) == ScanResult(head, result.events, len(repaired), [])


def test_the_crash_shape_turn_start_user_step_call_is_closed() -> None:
    events = events_of(*open_turn(1, "call_9"))
    result = scan(file_bytes(header("s1"), events), WHERE)
    assert [(c.type, c.seq, c.data) for c in result.closers] == [
        ("tool/result", 4, interrupted_result(1, 1, "call_9")),
        ("step/end", 5, {"turn": 1, "step": 1}),
        ("turn/end", 6, {"turn": 1, "reason": {"kind": "interrupted"}}),
    ]
    assert all(isinstance(c.time, float) and c.time > 0 for c in result.closers)


def test_a_turn_with_no_open_step_gets_only_turn_end() -> None:
    events = events_of(*closed_turn(1)[:-1])  # everything but turn/end: the step is closed
    result = scan(file_bytes(header("s1"), events), WHERE)
    assert [(c.type, c.seq, c.data) for c in result.closers] == [
        ("turn/end", len(events), {"turn": 1, "reason": {"kind": "interrupted"}})
    ]


def test_an_injected_turn_cut_before_its_end_is_closed() -> None:
    events = events_of(
        ("turn/start", {"turn": 1, "trigger": {"kind": "injection", "source": {"kind": "plugin"}}}),
        ("context/message", {"content": text("note"), "source": {"kind": "plugin"}}),
    )
    result = scan(file_bytes(header("s1"), events), WHERE)
    assert [(c.type, c.data) for c in result.closers] == [("turn/end", {"turn": 1, "reason": {"kind": "interrupted"}})]


def test_a_torn_tail_is_cut_before_the_turn_is_closed() -> None:
    head = header("s1")
    events = events_of(*open_turn(1))
    sound = file_bytes(head, events)
    result = scan(sound + b'{"type":"tool/result","seq":4,"time":1,"data":{"turn":1,"st', WHERE)
    assert result.keep_bytes == len(sound)
    assert [c.type for c in result.closers] == ["tool/result", "step/end", "turn/end"]
    assert [c.seq for c in result.closers] == [4, 5, 6]


@pytest.mark.parametrize(
    "specs",
    [
        [],
        closed_turn(1),
        closed_turn(1) + closed_turn(2),
        [("turn/start", {"turn": 1}), ("turn/end", {"turn": 1, "reason": {"kind": "cancelled"}})],
        [*closed_turn(1), ("usage", {"turn": 1, "step": 1, "usage": {}})],  # after the end: no turn is open
    ],
)
def test_a_balanced_log_gets_no_closers(specs: list[tuple[str, dict[str, Any]]]) -> None:
    events = events_of(*specs)
    content = file_bytes(header("s1"), events)
    assert scan(content, WHERE) == ScanResult(header("s1"), events, len(content), [])


# -- properties ---------------------------------------------------------------------------------------------

_texts = st.text(max_size=12)


@st.composite
def balanced_logs(draw: st.DrawFn) -> list[SessionEvent]:
    """A random session log as the loop writes it: message turns of steps with chunks and tool calls,
    injected turns, each turn closed."""
    specs: list[tuple[str, dict[str, Any]]] = []
    for turn in range(1, draw(st.integers(0, 4)) + 1):
        if draw(st.integers(0, 3)) == 0:
            source = {"kind": "plugin", "plugin": draw(_texts)}
            specs += [
                ("turn/start", {"turn": turn, "trigger": {"kind": "injection", "source": source}}),
                ("context/message", {"content": text(draw(_texts)), "source": source}),
                ("turn/end", {"turn": turn, "reason": {"kind": "completed"}}),
            ]
            continue
        specs.append(("turn/start", {"turn": turn, "trigger": {"kind": "message", "source": {"kind": "user"}}}))
        specs.append(("user/message", {"content": text(draw(_texts)), "source": {"kind": "user"}}))
        for step in range(1, draw(st.integers(0, 3)) + 1):
            specs.append(("step/start", {"turn": turn, "step": step}))
            pieces = draw(st.lists(_texts, max_size=4))
            for piece in pieces:
                specs.append(
                    ("assistant/chunk", {"turn": turn, "step": step, "chunk": {"type": "text-delta", "text": piece}})
                )
            specs.append(("assistant/message", {"turn": turn, "step": step, "content": text("".join(pieces))}))
            calls = [f"call_{turn}_{step}_{i}" for i in range(draw(st.integers(0, 3)))]
            for call in calls:
                specs.append(
                    ("tool/call", {"turn": turn, "step": step, "call_id": call, "name": "t", "arguments": "{}"})
                )
            for call in draw(st.permutations(calls)):
                result = {"turn": turn, "step": step, "call_id": call, "content": text(draw(_texts)), "is_error": False}
                specs.append(("tool/result", result))
            specs.append(("step/end", {"turn": turn, "step": step}))
        reason = draw(st.sampled_from(["completed", "cancelled", "error", "max-steps"]))
        specs.append(("turn/end", {"turn": turn, "reason": {"kind": reason}}))
    times = draw(st.lists(st.floats(0, 4e9, allow_nan=False), min_size=len(specs), max_size=len(specs)))
    return [SessionEvent(kind, seq, times[seq], data) for seq, (kind, data) in enumerate(specs)]


_PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_PROPERTY
@given(balanced_logs())
def test_property_a_balanced_log_round_trips(events: list[SessionEvent]) -> None:
    assert_balanced(events)  # the generator itself is sound
    head = header("s1", cwd="/w")
    content = file_bytes(head, events)
    assert scan(content, WHERE) == ScanResult(head, events, len(content), [])


@_PROPERTY
@given(balanced_logs(), st.data())
def test_property_a_log_cut_anywhere_scans_to_a_balanced_prefix(
    events: list[SessionEvent], data: st.DataObject
) -> None:
    head = header("s1")
    content = file_bytes(head, events)
    cut = data.draw(st.integers(0, len(content)), label="cut")
    prefix = content[:cut]
    if cut < head_len(head):
        with pytest.raises(CorruptSessionError):
            scan(prefix, WHERE)
        return
    result = scan(prefix, WHERE)
    complete = prefix.count(b"\n") - 1  # whole event lines kept
    assert result.header == head
    assert result.keep_bytes == prefix.rfind(b"\n") + 1
    assert result.events[:complete] == events[:complete]
    assert result.events[complete:] == result.closers
    assert_balanced(result.events)
    kinds = [c.type for c in result.closers]
    if result.closers:
        assert kinds[-1] == "turn/end"
        assert result.closers[-1].data["reason"] == {"kind": "interrupted"}
        assert all(kind == "tool/result" for kind in kinds[: -1 - kinds.count("step/end")])
    repaired = prefix[: result.keep_bytes] + b"".join(encode_event(c) for c in result.closers)
    assert scan(repaired, WHERE) == ScanResult(head, result.events, len(repaired), [])


@_PROPERTY
@given(balanced_logs().filter(lambda events: len(events) >= 2), st.data())
def test_property_a_corrupt_middle_line_is_reported_with_its_line_number(
    events: list[SessionEvent], data: st.DataObject
) -> None:
    lines = file_bytes(header("s1"), events).split(b"\n")[:-1]
    index = data.draw(st.integers(1, len(lines) - 2), label="index")  # 0-based; never the final line
    corruption = data.draw(st.sampled_from(["truncate", "garbage", "duplicate", "skip-seq", "nan"]), label="corruption")
    original = lines[index]
    if corruption == "truncate":
        lines[index] = original[: data.draw(st.integers(0, len(original) - 1), label="keep")]
    elif corruption == "garbage":
        lines[index] = b"#" + original
    elif corruption == "duplicate":
        lines[index] = lines[index - 1]
    elif corruption == "skip-seq":
        raw = json.loads(original)
        raw["seq"] += 1
        lines[index] = json.dumps(raw, separators=(",", ":")).encode()
    else:
        lines[index] = original.replace(b'"time":', b'"time":NaN,"was":', 1)
    with pytest.raises(CorruptSessionError) as caught:
        scan(b"\n".join(lines) + b"\n", WHERE)
    assert f"{WHERE}:{index + 1}:" in str(caught.value)


# -- the fast load path (issue #12): orjson by blocks, compact chunks, exact fallbacks -----------------------


def _chunk(turn: int, step: int, kind: str, value: str) -> tuple[str, dict[str, Any]]:
    return ("assistant/chunk", {"turn": turn, "step": step, "chunk": {"type": kind, "text": value}})


def test_loaded_text_chunks_are_compact_and_equal_to_what_was_written() -> None:
    from dsh.plugins.persistence import _format
    from dsh.services.sessions import ChunkEvent

    head = header("s1")
    specs = [
        *closed_turn(1)[:3],
        _chunk(1, 1, "text-delta", "héllo "),
        _chunk(1, 1, "reasoning-delta", "hmm"),
        ("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "usage", "usage": {"input_tokens": 1}}}),
        ("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "text": "x"}, "extra": 1}),
        *closed_turn(1)[3:],
    ]
    events = events_of(*specs)
    content = file_bytes(head, events)
    result = scan(content, WHERE)
    assert result == ScanResult(head, events, len(content), [])
    kinds = [type(event) for event in result.events]
    assert kinds[3:7] == [ChunkEvent, ChunkEvent, SessionEvent, SessionEvent]  # only plain text chunks compact
    assert [e.to_json() for e in result.events] == [e.to_json() for e in events]
    assert b"".join(encode_event(e) for e in result.events) == content[head_len(head) :]
    # many blocks: the block size is an implementation detail, the result is not
    many = events_of(*[_chunk(1, 1, "text-delta", f"w{i} ") for i in range(3000)])
    body = file_bytes(head, many)
    original, _format._BLOCK = _format._BLOCK, 4096
    try:
        assert scan(body, WHERE).events == many
    finally:
        _format._BLOCK = original


@pytest.mark.parametrize(
    "value",
    [2**64 + 1, -(2**70), 123456789012345678901234567890, "\ud800 lone surrogate", {"k": ["\udfff"]}],
    ids=["u64+1", "-2**70", "30-digits", "lone-surrogate", "nested-surrogate"],
)
def test_values_orjson_would_read_differently_load_exactly(value: Any) -> None:
    """orjson reads integers beyond 64 bits as floats and refuses lone surrogates: such a file takes the
    exact path, and the value comes back exactly as it was written (type included)."""
    head = header("s1")
    events = events_of(*closed_turn(1)[:2], ("custom", {"value": value}), *closed_turn(1)[2:])
    content = file_bytes(head, events)
    result = scan(content, WHERE)
    assert result == ScanResult(head, events, len(content), [])
    loaded = result.events[2].data["value"]
    assert loaded == value
    assert type(loaded) is type(value)


ODD_CHUNKS: dict[str, tuple[str, dict[str, Any]]] = {
    "usage-chunk": ("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "usage", "usage": {"x": 1}}}),
    "extra-data-key": ("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "text": "a"}, "x": 0}),
    "extra-chunk-key": (
        "assistant/chunk",
        {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "text": "a", "x": 0}},
    ),
    "text-not-str": ("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "text": 5}}),
    "turn-bool": ("assistant/chunk", {"turn": True, "step": 1, "chunk": {"type": "text-delta", "text": "a"}}),
    "kind-list": ("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": ["text-delta"], "text": "a"}}),
    "chunk-not-dict": ("assistant/chunk", {"turn": 1, "step": 1, "chunk": "text-delta"}),
    "other-step": _chunk(1, 2, "text-delta", "other step"),
    "reasoning": _chunk(1, 1, "reasoning-delta", "hmm"),
    "not-a-chunk": ("custom", {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "text": "a"}}),
}


@pytest.mark.parametrize("odd", sorted(ODD_CHUNKS))
@pytest.mark.parametrize("where", [0, 1, 700, 1499])
def test_a_run_of_chunks_with_one_odd_event_loads_exactly(odd: str, where: int) -> None:
    """The fast path checks a block's text chunks a column at a time and halves a run around anything else: an
    odd event anywhere in a long run loads exactly as written (a plain event, compact only if it is a plain
    text chunk), and every chunk around it is compact and equal to what was written."""
    from dsh.plugins.persistence import _format
    from dsh.services.sessions import ChunkEvent

    specs = [_chunk(1, 1, "text-delta", f"w{i} ") for i in range(1500)]
    specs[where] = ODD_CHUNKS[odd]
    events = events_of(*specs)
    content = file_bytes(header("s1"), events)
    original, _format._BLOCK = _format._BLOCK, 1 << 14  # several blocks, each a long run
    try:
        result = scan(content, WHERE)
    finally:
        _format._BLOCK = original
    assert result.events == events
    assert [e.to_json() for e in result.events] == [e.to_json() for e in events]
    compact = [type(e) is ChunkEvent for e in result.events]
    plain_text = odd in ("other-step", "reasoning")
    assert compact == [plain_text or index != where for index in range(len(events))]


@pytest.mark.parametrize(
    "bad",
    [b'"seq":true', b'"seq":"7"', b'"seq":99999', b'"seq":7.0'],
    ids=["bool-seq", "string-seq", "wrong-seq", "float-seq"],
)
def test_a_corrupt_chunk_in_a_long_run_is_named(bad: bytes) -> None:
    """A chunk line in the middle of a long run whose seq is not the next integer is a named error (the fast
    path's column checks refuse the block, the careful path names the line), and nothing else is accepted."""
    events = events_of(*[_chunk(1, 1, "text-delta", f"w{i} ") for i in range(3000)])
    lines = file_bytes(header("s1"), events).split(b"\n")
    index = 1 + 1500
    lines[index] = lines[index].replace(b'"seq":1500', bad, 1)
    with pytest.raises(CorruptSessionError) as caught:
        scan(b"\n".join(lines), WHERE)
    assert f"{WHERE}:{index + 1}:" in str(caught.value)


def test_the_fast_and_the_careful_path_load_the_same_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same file through the fast path and through the line-by-line path: equal events, and sessions seeded
    with them derive the same messages (what a resumed session sends the model)."""
    from dsh.plugins.persistence import _format
    from dsh.services.sessions import Session

    specs = [
        *closed_turn(1),
        ("turn/start", {"turn": 2, "trigger": {"kind": "message", "source": {"kind": "user"}}}),
        ("user/message", {"content": text("again"), "source": {"kind": "user"}}),
        ("step/start", {"turn": 2, "step": 1}),
        *[_chunk(2, 1, "reasoning-delta", f"r{i} ") for i in range(300)],
        *[_chunk(2, 1, "text-delta", f"w{i} ") for i in range(700)],
        ("assistant/message", {"turn": 2, "step": 1, "content": text("".join(f"w{i} " for i in range(700)))}),
        ("step/end", {"turn": 2, "step": 1}),
        ("turn/end", {"turn": 2, "reason": {"kind": "completed"}}),
    ]
    events = events_of(*specs)
    content = file_bytes(header("s1"), events)
    fast = scan(content, WHERE)
    monkeypatch.setattr(_format, "_parse_all", lambda *_: None)
    careful = scan(content, WHERE)
    assert fast == careful
    assert fast.events == events
    fast_session = Session(header("s1"), fast.events, seed_owned=True)
    careful_session = Session(header("s1"), careful.events, seed_owned=True)
    assert fast_session.derive_messages() == careful_session.derive_messages()
    assert len(fast_session.derive_messages()) == 4


def _stream_cases() -> dict[str, bytes]:
    head = header("s1")
    clean = file_bytes(head, events_of(*closed_turn(1), *[_chunk(1, 1, "text-delta", f"w{i} ") for i in range(500)]))
    lines = clean.split(b"\n")
    corrupt = b"\n".join([*lines[:200], b'{"type":"assistant/chunk","seq":', *lines[201:]])
    return {
        "clean": clean,
        "torn-tail": clean + b'{"type":"turn/start","se',
        "open-turn": file_bytes(head, events_of(*open_turn(1))),
        "corrupt-middle": corrupt,
        "huge-integer": file_bytes(head, events_of(*closed_turn(1)[:2], ("custom", {"n": 2**70}), *closed_turn(1)[2:])),
        "header-only": encode_header(head),
        "header-cut": encode_header(head)[:20],
        "empty": b"",
        "bad-header": b'{"type":"nope"}\n' + clean.split(b"\n", 1)[1],
    }


@pytest.mark.parametrize("piece", [1, 7, 300, 1 << 16])
@pytest.mark.parametrize("case", sorted(_stream_cases()))
def test_scanning_a_stream_is_scanning_the_whole_file(case: str, piece: int) -> None:
    """``scan_stream`` (the load's path: the file read a piece at a time) gives what ``scan`` of the whole file
    gives, repair and errors included, however the file is cut into pieces."""
    from dsh.plugins.persistence._format import scan_stream

    content = _stream_cases()[case]
    pieces = [content[i : i + piece] for i in range(0, len(content), piece)]
    try:
        expected: ScanResult | str = scan(content, WHERE)
    except CorruptSessionError as exc:
        expected = str(exc)
    reread: list[int] = []

    def whole() -> bytes:
        reread.append(1)
        return content

    try:
        got: ScanResult | str = scan_stream(iter(pieces), WHERE, whole)
    except CorruptSessionError as exc:
        got = str(exc)
    if case in ("clean", "torn-tail", "open-turn", "header-only"):
        assert not reread, "a sound file was read twice: the fast path did not take it"
    if isinstance(expected, ScanResult) and isinstance(got, ScanResult):
        assert (
            got.events[: len(got.events) - len(got.closers)]
            == expected.events[: len(expected.events) - len(expected.closers)]
        )
        assert [e.type for e in got.closers] == [e.type for e in expected.closers]
        assert (got.header, got.keep_bytes) == (expected.header, expected.keep_bytes)
    else:
        assert got == expected


@pytest.mark.parametrize("field", ["turn", "step"])
@pytest.mark.parametrize("value", [2**64 + 1, -(2**63) - 1])
def test_an_integer_beyond_64_bits_in_a_run_of_text_chunks_loads_exactly(field: str, value: int) -> None:
    """orjson reads it as a float: a block of text chunks only is not searched for long digit runs, so the
    columns' int checks must send it to the exact path, where it loads as the integer it is."""
    specs = [_chunk(1, 1, "text-delta", f"w{i} ") for i in range(200)]
    odd = {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "text": "odd"}}
    odd[field] = value
    specs[100] = ("assistant/chunk", odd)
    events = events_of(*specs)
    result = scan(file_bytes(header("s1"), events), WHERE)
    assert result.events == events
    loaded = result.events[100].data[field]
    assert loaded == value and type(loaded) is int


@given(
    st.lists(
        st.one_of(
            st.tuples(st.sampled_from(["text-delta", "reasoning-delta"]), st.text(max_size=8)),
            st.just(("step/end", "")),
        ),
        max_size=12,
    )
)
def test_queued_text_chunks_are_written_as_encode_event_writes_them(items: list[tuple[str, str]]) -> None:
    """The persistence listener queues text chunks as events and ``join_lines`` encodes them with the batch
    (issue #12): the bytes are those of encoding every event on its own, other lines kept as they are."""
    from dsh.plugins.persistence._format import join_lines
    from dsh.services.sessions import Session

    session = Session(SessionHeader(id="s", created_at=0.0))
    queued: list[Any] = []
    for kind, chunk_text in items:
        if kind == "step/end":
            event = session.append("step/end", {"turn": 1, "step": 2})
            queued.append(encode_event(event))
        else:
            event = session.append_chunk(1, 2, kind, chunk_text)
            queued.append(event)
    assert join_lines(queued) == b"".join(encode_event(event) for event in session.events)
