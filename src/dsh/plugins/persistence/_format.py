"""The JSONL session file format and crash repair, as pure functions over bytes (no I/O).

Format (version 1): line 1 is the header ``{"type": "session", "version": 1, "id", "created_at", "cwd"?,
"parent_session"?}``; every further line is one event ``{"type", "seq", "time", "data"}``, chunks included,
``seq`` contiguous from 0. Lines end with ``\\n``; JSON is compact UTF-8 (orjson); a string orjson cannot spell (a lone surrogate) or an
integer beyond 64 bits makes that line ASCII-escaped JSON from the standard encoder, which spells both exactly.

Repair on load (:func:`scan`), the rules of reference §6.3:

* A torn final line (no newline, or not parseable) is cut.
* A bad line anywhere before it (unparseable, not an event, a ``seq`` out of order) is an error naming the
  file and line, and nothing is changed.
* A final turn without ``turn/end`` is closed, never truncated: an error ``tool/result`` for each of its tool
  calls without a result, ``step/end`` if a step is open, then ``turn/end {kind: "interrupted"}``.
"""

from __future__ import annotations

import gc
import operator
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any, cast

import orjson

from dsh._jsonlimits import MAX_LOG_DEPTH, exceeds_depth, text_may_exceed
from dsh.errors import DshError
from dsh.services.sessions import ChunkEvent, SessionEvent, SessionHeader, chunk_where, dumps_json, parse_json

__all__ = [
    "CorruptSessionError",
    "ScanResult",
    "encode_event",
    "encode_header",
    "join_lines",
    "scan",
    "scan_stream",
]

FORMAT_VERSION = 1
_LINE_DEPTH = MAX_LOG_DEPTH + 1
"""An event line wraps its ``data`` in one more object."""
_TOO_DEEP = f"the event is nested deeper than {MAX_LOG_DEPTH} levels (dsh never writes such a line)"
INTERRUPTED_TEXT = "Tool call interrupted by a crash; no result was recorded."


class CorruptSessionError(DshError, ValueError):
    """A session file cannot be loaded as it is; the message names the file and line."""

    default_code = "SESSION_CORRUPT"


def encode_header(header: SessionHeader) -> bytes:
    return dumps_json({"type": "session", **header.to_json()}) + b"\n"


def encode_event(event: SessionEvent) -> bytes:
    """One line of the file. The data are lossless JSON already (the session checked them on append, or a
    strict parser produced them), so this only encodes; :func:`~dsh.services.sessions.dumps_json` still keeps
    the lossless rules if they were not.

    A text chunk (:class:`ChunkEvent`, nearly every line) is written around its already encoded text, with the
    bytes orjson would give for the whole envelope: no dicts are built for it (the chunk path, RFC 0007).
    """
    if type(event) is ChunkEvent:
        middle = _CHUNK_MIDDLES.get(event.where) or _chunk_middle(event.where)
        return _CHUNK_LINE % (event.seq, orjson.dumps(event.time), middle, event.text_json)
    return dumps_json({"type": event.type, "seq": event.seq, "time": event.time, "data": event.data}) + b"\n"


def join_lines(items: Sequence[bytes | ChunkEvent]) -> bytes:
    """The file's bytes for queued lines: encoded lines as they are, text chunks (queued as events by the
    persistence listener, which then does no encoding on the chunk path) encoded here with
    :func:`encode_event`'s template, in one pass over the batch."""
    middles, dumps, line = _CHUNK_MIDDLES, orjson.dumps, _CHUNK_LINE
    return b"".join(
        [
            line % (item.seq, dumps(item.time), middles.get(item.where) or _chunk_middle(item.where), item.text_json)
            if type(item) is ChunkEvent
            else cast(bytes, item)
            for item in items
        ]
    )


_CHUNK_LINE = b'{"type":"assistant/chunk","seq":%d,"time":%s%s%s}}}\n'
_CHUNK_MIDDLES: dict[tuple[int, int, str], bytes] = {}
"""The constant part of a step's chunk lines, between the time and the text, by :attr:`ChunkEvent.where`."""


def _chunk_middle(where: tuple[int, int, str]) -> bytes:
    turn, step, kind = where
    if len(_CHUNK_MIDDLES) >= 4096:  # steps of long-gone turns
        _CHUNK_MIDDLES.clear()
    middle = _CHUNK_MIDDLES[where] = b',"data":{"turn":%d,"step":%d,"chunk":{"type":%s,"text":' % (
        turn,
        step,
        dumps_json(kind),
    )
    return middle


@dataclass(frozen=True, slots=True)
class ScanResult:
    header: SessionHeader
    events: list[SessionEvent]
    """The events in the file (after a torn tail was cut), then the closers to append."""
    keep_bytes: int
    """Length of the file's sound prefix; the file must be truncated to it when shorter than the file."""
    closers: list[SessionEvent]
    """Events to append so the last turn is closed (already included at the end of ``events``)."""


def _parse_header(line: bytes, where: str) -> SessionHeader:
    try:
        raw = parse_json(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptSessionError(f"{where}:1: the header is not valid JSON ({exc})") from None
    except RecursionError:
        raise CorruptSessionError(f"{where}:1: the header is nested too deep") from None
    if not isinstance(raw, dict) or raw.get("type") != "session" or not isinstance(raw.get("id"), str):
        raise CorruptSessionError(f"{where}:1: not a dsh session header")
    version = raw.get("version")
    if type(version) is not int or version != FORMAT_VERSION:
        raise CorruptSessionError(f"{where}:1: session format version {version!r} is not supported")
    created_at, cwd, parent = raw.get("created_at", 0.0), raw.get("cwd"), raw.get("parent_session")
    if type(created_at) not in (int, float) or not isinstance(cwd, str | None) or not isinstance(parent, str | None):
        raise CorruptSessionError(f"{where}:1: the header's created_at, cwd or parent_session has the wrong type")
    try:
        stamp = float(created_at)
    except OverflowError:
        raise CorruptSessionError(f"{where}:1: created_at is out of range") from None
    call = raw.get("parent_call")
    if not isinstance(call, str | None):
        raise CorruptSessionError(f"{where}:1: the header's parent_call has the wrong type")
    return SessionHeader(id=raw["id"], created_at=stamp, cwd=cwd, parent_session=parent, parent_call=call)


def _event(raw: Any, expected_seq: int) -> SessionEvent:
    """The event a parsed line holds; ``ValueError`` says why it is not a valid next event."""
    if type(raw) is not dict:
        raise ValueError("not an event object")
    kind, seq, data, stamp = raw.get("type"), raw.get("seq"), raw.get("data"), raw.get("time", 0.0)
    if type(kind) is not str or type(seq) is not int or type(data) is not dict or type(stamp) not in (int, float):
        raise ValueError("not an event (type, seq, time, data)")
    if seq != expected_seq:
        raise ValueError(f"seq {seq} where {expected_seq} was expected")
    try:
        return SessionEvent(kind, seq, float(stamp), data)
    except OverflowError:
        raise ValueError("time is out of range") from None


def scan(content: bytes, where: str, *, fast: bool = True) -> ScanResult:
    """Parse a whole session file; decide what repair it needs. Raises :class:`CorruptSessionError`.

    *fast*: try the block parser first (False: the line-by-line path only, for a caller whose block parser
    already refused this content; it would refuse it again at the same block)."""
    first_newline = content.find(b"\n")
    if first_newline < 0:
        if content:
            raise CorruptSessionError(f"{where}:1: the header is incomplete (the file was cut while being created)")
        raise CorruptSessionError(f"{where}: the file is empty")
    header = _parse_header(content[:first_newline], where)
    body_start, body_end = first_newline + 1, content.rfind(b"\n") + 1
    parsed = _parse_all(content, body_start, body_end) if fast else None  # no copy of the body, no list of lines
    if parsed is not None:
        parsed.extend(closers := _closers(parsed))
        return ScanResult(header, parsed, body_end, closers)
    lines = content.split(b"\n")
    # After the split, the last element is what follows the final newline: b"" for a clean file.
    complete, tail = lines[:-1], lines[-1]
    events: list[SessionEvent] = []
    keep = body_start
    last = len(complete) - 1
    for index in range(1, len(complete)):
        line = complete[index]
        try:
            raw = parse_json(line)
        except (ValueError, UnicodeDecodeError) as exc:
            if index == last and not tail:
                break  # the final line is torn (a partial write): cut it
            raise CorruptSessionError(f"{where}:{index + 1}: {exc}") from None
        except RecursionError:
            raise CorruptSessionError(f"{where}:{index + 1}: {_TOO_DEEP}") from None
        if text_may_exceed(line, _LINE_DEPTH) and exceeds_depth(raw, _LINE_DEPTH):
            raise CorruptSessionError(f"{where}:{index + 1}: {_TOO_DEEP}")
        try:
            events.append(_event(raw, len(events)))
        except ValueError as exc:  # well-formed JSON that is not the next event: never a torn write
            raise CorruptSessionError(f"{where}:{index + 1}: {exc}") from None
        keep += len(line) + 1
    closers = _closers(events)
    return ScanResult(header, events + closers, keep, closers)


_BLOCK = 1 << 16
"""Bytes of lines parsed per orjson call: big enough to amortise the call, small enough that a block's transient
dicts (~5x its size) stay in the processor's cache while its columns are checked and converted, several passes
over them (64 KiB: 2.3 s for a 1M-chunk file here, 1 MiB: 4.5 s, RFC 0007)."""
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_NUMBER = b"0" * 19
"""orjson reads an integer beyond 64 bits (below -2**63 or above 2**64 - 1) as a float (lossy): a block that may
hold one (a run of 19 digits: -9223372036854775809 has 19, found with one translate and one substring search)
makes the file take the exact path."""
_CHUNK_KINDS = {"text-delta": "text-delta", "reasoning-delta": "reasoning-delta"}
_TYPES: dict[str, str] = {}
"""One shared string per event type (parsers give every line its own copy)."""


def _parse_all(content: bytes, start: int, end: int) -> list[SessionEvent] | None:
    """The fast path for a sound file in memory: the body (``content[start:end]``, whole lines) a block of lines
    at a time (:func:`_parse_block`); None when any block is not accepted (the line-by-line path decides).
    The garbage collector is paused: a million fresh containers would trigger full collections for nothing."""
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        events: list[SessionEvent] = []
        for position, stop in _blocks(content, start, end):
            if not _parse_block(content[position:stop], events):
                return None
        return events
    finally:
        if gc_was_enabled:
            gc.enable()


def _blocks(data: bytes, start: int, end: int) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` of each block of ``data[start:end]`` (whole lines, ``end`` just after a newline): at
    most :data:`_BLOCK` bytes of lines, or one line longer than that, *stop* at its last newline."""
    position = start
    while position < end:
        stop = data.rfind(b"\n", position, min(end, position + _BLOCK))
        if stop < position:  # one line longer than a block
            stop = data.find(b"\n", position, end)
        yield position, stop
        position = stop + 1


def scan_stream(chunks: Iterable[bytes], where: str, whole: Callable[[], bytes]) -> ScanResult:
    """:func:`scan` of the concatenation of *chunks* (a file read a piece at a time) without ever holding all of
    it: the fast path parses each block of whole lines as it arrives, so the file's bytes and its events are
    never in memory together (a 156 MB session peaked at its bytes plus its events). Whatever the fast path does
    not accept (a corrupt or odd line, a header it cannot read) is decided by :func:`scan` of ``whole()``, the
    file read again: the same result, error or repair, as ``scan(whole(), where)``."""
    header: SessionHeader | None = None
    pieces: list[bytes] = []  # what follows the last newline so far
    events: list[SessionEvent] = []
    keep = 0
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for chunk in chunks:
            newline = chunk.rfind(b"\n")
            if newline < 0:
                pieces.append(chunk)
                continue
            data = b"".join((*pieces, chunk[: newline + 1])) if pieces else chunk[: newline + 1]
            pieces = [chunk[newline + 1 :]]
            if header is None:
                first = data.find(b"\n")
                try:
                    header = _parse_header(data[:first], where)
                except CorruptSessionError:
                    return scan(whole(), where)
                keep = first + 1
                data = data[first + 1 :]
            for position, stop in _blocks(data, 0, len(data)):
                if not _parse_block(data[position:stop], events):
                    events.clear()
                    return scan(whole(), where, fast=False)
            keep += len(data)
    finally:
        if gc_was_enabled:
            gc.enable()
    if header is None:  # no complete first line: the careful path names what is wrong
        return scan(whole(), where)
    events.extend(closers := _closers(events))
    return ScanResult(header, events, keep, closers)


def _parse_block(block: bytes, events: list[SessionEvent]) -> bool:
    """Parse one block of whole lines (without the last newline) with orjson as one JSON array (the lines
    joined with commas) and append its events; False, having appended nothing, when any line is not exactly
    the next valid event, or holds what orjson reads differently from the strict standard parser (integers
    beyond 64 bits) or refuses (lone surrogates).

    Nearly every line of a big session is a text chunk, so the block is checked and converted a column at a
    time (``map`` over the block's values with C-level getters and type checks, :func:`_add_events`), not
    line by line: the checks are the same as for one line, only batched."""
    try:
        values = orjson.loads(b"[" + block.replace(b"\n", b",") + b"]")
    except orjson.JSONDecodeError:
        return False
    count = len(values)
    if count != block.count(b"\n") + 1:
        return False
    try:  # every value an object with the four fields (a missing one: the careful path says which)
        kinds = list(map(_TYPE, values))
        seqs = list(map(_SEQ, values))
        stamps = list(map(_TIME, values))
        datas = list(map(_DATA, values))
    except (KeyError, TypeError):
        return False
    del values
    seq = len(events)
    if (
        seqs != list(range(seq, seq + count))
        or set(map(type, seqs)) != _INT  # True == 1: the range comparison alone would take a bool
        or set(map(type, kinds)) != _STR
        or set(map(type, datas)) != _DICT
        or set(map(type, stamps)) != _FLOAT  # the careful path gives the reason (ints, bools, odd times)
    ):
        return False
    # A block of text chunks only cannot hide an integer beyond 64 bits (read as a float beyond 2**63 by
    # orjson): its seqs, turns and steps are checked ints and its texts strings, so only the times are left to
    # bound. Any other block is searched for a run of 19 digits, as the whole body used to be (1M chunks: 0.18 s).
    if min(stamps) > -_HUGE and max(stamps) < _HUGE and _text_chunks(events, kinds, seqs, stamps, datas, 0, count):
        return True
    if _LONG_NUMBER in block.translate(_DIGITS_AS_ZERO):
        return False
    _add_events(events, kinds, seqs, stamps, datas, 0, count)
    return True


_HUGE = 2.0**63
"""No float below this in magnitude can be orjson's reading of an integer beyond 64 bits (|i| ≥ 2**63)."""


_TYPE, _SEQ, _TIME, _DATA = (operator.itemgetter(key) for key in ("type", "seq", "time", "data"))
_TURN, _STEP, _CHUNK_VALUE, _TEXT = (operator.itemgetter(key) for key in ("turn", "step", "chunk", "text"))
_INT, _STR, _DICT, _FLOAT = {int}, {str}, {dict}, {float}
_CHUNK = "assistant/chunk"
_ONE_BY_ONE = 16
"""A run this short that is not all text chunks is converted line by line."""


def _add_events(
    events: list[SessionEvent],
    kinds: list[str],
    seqs: list[int],
    stamps: list[float],
    datas: list[dict[str, Any]],
    low: int,
    high: int,
) -> None:
    """Append the events of ``[low, high)`` of a checked block (types, seqs and times are valid): a run of
    text chunks in one go (:func:`_text_chunks`), anything else split in halves down to short runs, which are
    converted line by line. A block with a few other events among its chunks costs a few extra checks per
    level of halving, never a line-by-line pass over its chunks."""
    if high - low <= _ONE_BY_ONE:
        events.extend(map(_one_event, kinds[low:high], seqs[low:high], stamps[low:high], datas[low:high]))
        return
    if _text_chunks(events, kinds, seqs, stamps, datas, low, high):
        return
    middle = (low + high) // 2
    _add_events(events, kinds, seqs, stamps, datas, low, middle)
    _add_events(events, kinds, seqs, stamps, datas, middle, high)


def _text_chunks(
    events: list[SessionEvent],
    kinds: list[str],
    seqs: list[int],
    stamps: list[float],
    datas: list[dict[str, Any]],
    low: int,
    high: int,
) -> bool:
    """If every event of ``[low, high)`` is a text chunk exactly as :func:`_one_event` would take one (data
    ``{"turn": int, "step": int, "chunk": {"type": "text-delta" | "reasoning-delta", "text": str}}``, nothing
    else), append them as :class:`ChunkEvent`\\ s and return True; otherwise append nothing."""
    if kinds[low:high].count(_CHUNK) != high - low:
        return False
    run = datas[low:high]
    if set(map(len, run)) != {3}:
        return False
    try:
        turns, steps, chunks = list(map(_TURN, run)), list(map(_STEP, run)), list(map(_CHUNK_VALUE, run))
        if set(map(type, chunks)) != _DICT or set(map(len, chunks)) != {2}:
            return False
        chunk_kinds, texts = list(map(_TYPE, chunks)), list(map(_TEXT, chunks))
        used_kinds = set(chunk_kinds)  # an unhashable kind raises TypeError
    except (KeyError, TypeError):
        return False
    if not _CHUNK_KINDS.keys() >= used_kinds:
        return False
    if set(map(type, texts)) != _STR or set(map(type, turns)) != _INT or set(map(type, steps)) != _INT:
        return False  # (types of the lists, not of their sets: True == 1 would hide in a set)
    if len(set(turns)) == len(set(steps)) == len(used_kinds) == 1:  # one step's text: one shared place
        wheres: Any = repeat(chunk_where(turns[0], steps[0], chunk_kinds[0]), high - low)
    else:
        wheres = map(chunk_where, turns, steps, chunk_kinds)
    made = list(map(_new_event, repeat(ChunkEvent, high - low)))
    deque(map(setattr, made, repeat("seq"), seqs[low:high]), 0)
    deque(map(setattr, made, repeat("time"), stamps[low:high]), 0)
    deque(map(setattr, made, repeat("where"), wheres), 0)
    # Each text encoded by orjson (no lone surrogate got past its parser), copied to a right-sized object.
    deque(map(setattr, made, repeat("text_json"), map(_RIGHT_SIZED, map(orjson.dumps, texts))), 0)
    events.extend(made)
    return True


_new_event = object.__new__
_RIGHT_SIZED = b"%s".__mod__
"""orjson's result keeps its ~4 KiB buffer; a copy is right-sized (see :func:`~dsh.services.sessions.json_string`)."""


def _one_event(kind: str, seq: int, stamp: float, data: dict[str, Any]) -> SessionEvent:
    if kind == _CHUNK and len(data) == 3:
        chunk, turn, step = data.get("chunk"), data.get("turn"), data.get("step")
        if type(chunk) is dict and len(chunk) == 2 and type(turn) is int and type(step) is int:
            kind_name, text = chunk.get("type"), chunk.get("text")
            chunk_kind = _CHUNK_KINDS.get(kind_name) if type(kind_name) is str else None  # (a list: unhashable)
            if chunk_kind is not None and type(text) is str:
                return ChunkEvent(seq, stamp, turn, step, chunk_kind, text)
    shared = _TYPES.get(kind)
    if shared is None:
        shared = _TYPES.setdefault(kind, kind) if len(_TYPES) < 1024 else kind
    return SessionEvent(shared, seq, stamp, data)


def _closers(events: list[SessionEvent]) -> list[SessionEvent]:
    """The events that close an interrupted final turn (empty when the log ends balanced)."""
    last_start = None
    for index in range(len(events) - 1, -1, -1):
        kind = events[index].type
        if kind == "turn/end":
            return []
        if kind == "turn/start":
            last_start = index
            break
    if last_start is None:
        return []
    turn = events[last_start].data.get("turn")
    open_calls: dict[str, dict[str, Any]] = {}
    step_open: dict[str, Any] | None = None
    for index in range(last_start, len(events)):
        event = events[index]
        kind = event.type
        if kind == "assistant/chunk":  # most of a long turn; its data is built on access when compact
            continue
        data = event.data
        if kind == "tool/call":
            open_calls[data.get("call_id", "")] = data
        elif kind == "tool/result":
            open_calls.pop(data.get("call_id", ""), None)
        elif kind == "step/start":
            step_open = data
        elif kind == "step/end":
            step_open = None
    now = time.time()
    closers: list[dict[str, Any]] = []
    for call_id, call in open_calls.items():
        closers.append(
            {
                "type": "tool/result",
                "data": {
                    "turn": call.get("turn", turn),
                    "step": call.get("step", 0),
                    "call_id": call_id,
                    "content": [{"type": "text", "text": INTERRUPTED_TEXT}],
                    "is_error": True,
                    "error": {"name": "InterruptedError", "code": "interrupted"},
                },
            }
        )
    if step_open is not None:
        closers.append(
            {"type": "step/end", "data": {"turn": step_open.get("turn", turn), "step": step_open.get("step", 0)}}
        )
    closers.append({"type": "turn/end", "data": {"turn": turn, "reason": {"kind": "interrupted"}}})
    base = len(events)
    return [SessionEvent(c["type"], base + i, now, c["data"]) for i, c in enumerate(closers)]
