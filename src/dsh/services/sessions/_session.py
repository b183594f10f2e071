"""A session: an append-only log of events, the single source of truth of a conversation.

Guarantees:

* Seqs are contiguous from 0 (a seeded session checks it on construction) and ``events`` holds them in
  order; ``events[i].seq == i`` until :meth:`Session.release_chunks` drops the streamed chunks of closed steps
  (a durable backend calls it once those are in its file): then ``events`` skips them, and nothing in the
  live process needs them (messages derive from ``assistant/message``; replays read the file).
* Data deeper than :data:`~dsh._jsonlimits.MAX_LOG_DEPTH` is refused by the append itself, before the event
  exists (it could be logged but never written or loaded).
* ``data`` is lossless JSON and is copied on append, so the log never aliases caller objects; events are
  frozen and must be treated as immutable.
* :meth:`Session.append` pushes first and then notifies the store's hook synchronously (which emits
  ``session/event``); an exception from a listener propagates to the appender, *after* the event is in the log
  and every other listener has seen it.
* :meth:`Session.derive_messages` is a pure function of the log (reference §6.2). Each message is derived once,
  when its event is first seen, as a read-only deep copy (:class:`DerivedMessage`), and shared by every later
  request: a request costs O(new events), not O(history). Each call returns a new list (the caller's to
  change) of those shared messages; changing a message raises ``TypeError``, so no request rewriter
  can change the log, the cache or another request.
* A ``context/compaction`` event (``{summary, upto}``) makes every message of an event before seq ``upto`` give
  way to one user message carrying the summary (:func:`summary_message`); messages of later events follow as
  usual, live and after a load alike. The log keeps everything (it is append-only); the cache drops what the
  summary stands for, so a long compacted session costs what its current view costs. Its optional ``keep``
  (seqs before ``upto``) keeps those events' messages verbatim after the summary: the running turn's user
  messages when a compaction cuts inside a turn (at a step boundary, never between a call and its result).
* A ``context/prune`` event (``{results: [{seq, stub}]}``) replaces, in the view, the tool result derived from
  each named ``tool/result`` event by the one-line *stub* (same call id, same error flag): the log keeps the
  output, the model sees the stub, live and after a load alike.
"""

from __future__ import annotations

import json
import operator
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import compress
from typing import Any, cast

import orjson

from dsh.services.llm import ContentBlock, Message
from dsh.services.sessions._json import FrozenDict, copy_json, freeze_json, json_string, parse_json

__all__ = [
    "COMPACTION_EVENT",
    "PRUNE_EVENT",
    "ChunkEvent",
    "DerivedMessage",
    "Session",
    "SessionEvent",
    "SessionHeader",
    "summary_message",
    "title_from_content",
]

COMPACTION_EVENT = "context/compaction"
PRUNE_EVENT = "context/prune"

TITLE_LENGTH = 80


def title_from_content(content: list[Any]) -> str | None:
    """A session title from a user message: its text, whitespace collapsed, at most 80 characters."""
    text = " ".join(
        " ".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text").split()
    )
    if not text:
        return None
    return text if len(text) <= TITLE_LENGTH else text[: TITLE_LENGTH - 1] + "…"


SESSION_FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """One log entry: ``{type, seq, time, data}``; ``time`` is Unix seconds."""

    type: str
    seq: int
    time: float
    data: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "seq": self.seq, "time": self.time, "data": self.data}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> SessionEvent:
        data = raw.get("data")
        if not isinstance(raw.get("type"), str) or not isinstance(raw.get("seq"), int) or not isinstance(data, dict):
            raise ValueError(f"not a session event: {raw!r:.200}")
        return cls(raw["type"], raw["seq"], float(raw.get("time", 0.0)), copy_json(data))


class ChunkEvent(SessionEvent):
    """An ``assistant/chunk`` event of text held compactly: the chunk path's event (issue #12). The loop appends
    one per streamed text or reasoning delta (:meth:`Session.append_chunk`) and a loaded session holds one per
    stored chunk: two pointers each instead of two dicts. ``data`` is built on each access, equal to the data
    the event stands for (``{"turn", "step", "chunk": {"type", "text"}}``), and the caller's to keep;
    everything else behaves as a :class:`SessionEvent` with that data (equality included).

    The text is held as its JSON string literal (:attr:`text_json`), encoded once and copied as it is by every
    consumer that writes JSON (the session file's line, the ``session/update`` frame); :attr:`text` decodes it.

    Read-only like every event, by convention rather than by the interpreter: a frozen dataclass's stores go
    through ``object.__setattr__`` (≈ 1.3 µs for an event here), plain slot stores cost ≈ 0.16 µs, and one is
    made per streamed chunk (RFC 0007). Nothing outside this module assigns to an event."""

    __slots__ = ("text_json", "where")
    type = "assistant/chunk"  # a class constant shadowing the slot: one store less per chunk
    where: tuple[int, int, str]
    """``(turn, step, chunk type)``: one tuple shared by every chunk of a step."""
    text_json: bytes
    """The text as a JSON string literal (quotes included), as :func:`dumps_json` writes it."""

    __setattr__ = object.__setattr__  # see the class docstring: plain slot stores on the chunk path
    __delattr__ = object.__delattr__

    def __init__(
        self, seq: int, time: float, turn: int, step: int, kind: str, text: str, text_json: bytes | None = None
    ) -> None:
        self.seq = seq  # type: ignore[misc]
        self.time = time  # type: ignore[misc]
        self.where = chunk_where(turn, step, kind)
        self.text_json = text_json if text_json is not None else json_string(text)

    @property
    def text(self) -> str:
        text: str = _loads_text(self.text_json)
        return text

    @property
    def data(self) -> dict[str, Any]:
        turn, step, kind = self.where
        return {"turn": turn, "step": step, "chunk": {"type": kind, "text": self.text}}

    @property
    def text_chunk(self) -> tuple[int, int, str, str]:
        """``(turn, step, chunk type, text)`` without building ``data``."""
        turn, step, kind = self.where
        return turn, step, kind, self.text

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SessionEvent):
            return NotImplemented
        return (self.type, self.seq, self.time, self.data) == (other.type, other.seq, other.time, other.data)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ChunkEvent(seq={self.seq!r}, time={self.time!r}, data={self.data!r})"

    def __reduce__(self) -> Any:
        return (ChunkEvent, (self.seq, self.time, *self.where, "", self.text_json))


_WHERE: dict[tuple[int, int, str], tuple[int, int, str]] = {}


def chunk_where(turn: int, step: int, kind: str) -> tuple[int, int, str]:
    """The shared ``(turn, step, kind)`` tuple of :attr:`ChunkEvent.where` (one per step, not one per chunk)."""
    key = (turn, step, kind)
    where = _WHERE.get(key)
    if where is None:
        if len(_WHERE) >= 4096:  # steps of long-gone turns: sharing is only worth it within a step
            _WHERE.clear()
        where = _WHERE[key] = key
    return where


def _loads_text(text_json: bytes) -> Any:
    try:
        return orjson.loads(text_json)
    except orjson.JSONDecodeError:  # a lone surrogate's escape, which orjson refuses to decode
        return parse_json(text_json)


_new_event = object.__new__
_dumps = orjson.dumps
_SEQ_OF, _TYPE_OF = operator.attrgetter("seq"), operator.attrgetter("type")
_CHUNK_TYPE = "assistant/chunk"


@dataclass(frozen=True, slots=True)
class SessionHeader:
    """Kept outside the log: ``{version, id, created_at, cwd?, parent_session?, parent_call?}``.

    ``parent_session`` and ``parent_call``: a sub-agent's session names the session and the tool call (``task``)
    that started it; listings hide such sessions unless asked."""

    id: str
    created_at: float
    cwd: str | None = None
    parent_session: str | None = None
    parent_call: str | None = None
    version: int = SESSION_FORMAT_VERSION

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"version": self.version, "id": self.id, "created_at": self.created_at}
        if self.cwd is not None:
            out["cwd"] = self.cwd
        if self.parent_session is not None:
            out["parent_session"] = self.parent_session
        if self.parent_call is not None:
            out["parent_call"] = self.parent_call
        return out


AppendHook = Callable[["Session", SessionEvent], None]


class DerivedMessage(FrozenDict):
    """A model message derived from one log event: read-only, shared by every request of the session.

    ``seq`` is the event it came from (so a later view can replace a range of history, e.g. with a summary,
    by seq)."""

    __slots__ = ("seq",)

    def __init__(self, message: Message, seq: int) -> None:
        super().__init__(role=message["role"], content=freeze_json(message["content"]))
        self.seq = seq


class Session:
    """An append-only event log with a header. Create sessions through ``ctx.sessions``."""

    __slots__ = (
        "_derived",
        "_derived_upto",
        "_events",
        "_hook",
        "_next_seq",
        "_provider_ids",
        "_release_from",
        "_summary",
        "_where",
        "header",
        "id",
    )

    def __init__(self, header: SessionHeader, seed: Sequence[SessionEvent] = (), *, seed_owned: bool = False) -> None:
        """*seed_owned*: the seed's data were just parsed from JSON by a strict parser and nobody else holds
        them (a persistence backend's load), so they are adopted without the validating copy."""
        if list(map(_SEQ_OF, seed)) != list(range(len(seed))):  # C-level: a loaded seed is a million events
            for index, event in enumerate(seed):
                if event.seq != index:
                    raise ValueError(f"seeded event {index} has seq {event.seq}; seqs must be contiguous from 0")
        if seed_owned:
            events = list(seed)
        else:
            events = [SessionEvent(e.type, e.seq, e.time, copy_json(e.data, f"{e.type}#{e.seq}")) for e in seed]
        self.header = header
        self.id: str = header.id
        """The session's id (= ``header.id``; a plain attribute: read on every event's path)."""
        self._events = events
        self._hook: AppendHook | None = None
        self._derived: list[DerivedMessage] = []
        self._derived_upto = 0
        self._provider_ids: dict[str, str] = {}
        """Session tool-call id → the provider's own, for the calls the loop renamed (``dsh.loop._call_ids``),
        read from the ``assistant/message`` blocks as they are derived: the tool results answer with it."""
        self._summary: tuple[str, DerivedMessage] | None = None
        """The last compaction's summary text and the message standing for it (first in ``_derived``)."""
        self._next_seq = len(events)
        self._release_from = 0
        """Index in ``_events`` before which no releasable chunk is left."""
        self._where: tuple[int, int, str] = (-1, -1, "")
        """The last appended chunk's :attr:`ChunkEvent.where` (chunks of one step share it)."""

    @property
    def events(self) -> Sequence[SessionEvent]:
        """A read-only view of the log (a tuple snapshot), without the chunks already released."""
        return tuple(self._events)

    @property
    def seq(self) -> int:
        """The seq the next event will get (= the number of events appended or seeded)."""
        return self._next_seq

    def events_without_chunks(self) -> list[SessionEvent]:
        """The log without its ``assistant/chunk`` events (a new list): what a walk over a resumed session's
        history for anything but streamed chunks needs, filtered at C speed (a loaded session is nearly all
        chunks: a Python loop over a million of them costs ~0.1 s per walk)."""
        events = self._events
        return list(compress(events, map(_CHUNK_TYPE.__ne__, map(_TYPE_OF, events))))

    def last(self, *types: str) -> SessionEvent | None:
        """The most recent event whose type is one of *types*."""
        for event in reversed(self._events):
            if event.type in types:
                return event
        return None

    def append(self, type: str, data: dict[str, Any]) -> SessionEvent:
        """Validate and copy *data*, push the event, then notify (``session/event``) synchronously."""
        copied = _copy_text_chunk(data) if type == "assistant/chunk" else None
        event = SessionEvent(type, self._next_seq, time.time(), copied or copy_json(data, type))
        self._events.append(event)
        self._next_seq += 1
        hook = self._hook
        if hook is not None:
            hook(self, event)
        return event

    def append_chunk(self, turn: int, step: int, kind: str, text: str) -> ChunkEvent:
        """Append a text chunk (``kind`` is ``text-delta`` or ``reasoning-delta``) as ``append("assistant/chunk",
        {"turn", "step", "chunk": {"type": kind, "text": text}})`` would, without building or copying dicts:
        nearly every event of a turn is one (the chunk path). The text is JSON-encoded once, here."""
        where = self._where
        if where[0] != turn or where[1] != step or where[2] != kind:
            where = self._where = chunk_where(turn, step, kind)
        try:
            text_json = b"%s" % _dumps(text)  # right-sized: orjson's object keeps its ~4 KiB buffer (json_string)
        except TypeError:  # a lone surrogate
            text_json = json_string(text)
        event: ChunkEvent = _new_event(ChunkEvent)
        event.seq = self._next_seq  # type: ignore[misc]
        event.time = time.time()  # type: ignore[misc]
        event.where = where
        event.text_json = text_json
        # The same push and notify as append(), written out: a shared helper would be one more Python frame per
        # streamed chunk (about 3 % of the chunk path, RFC 0007).
        self._events.append(event)
        self._next_seq += 1
        hook = self._hook
        if hook is not None:
            hook(self, event)
        return event

    def release_chunks(self, before_seq: int) -> int:
        """Drop from memory the ``assistant/chunk`` events of every step closed (by its ``assistant/message`` or
        ``step/end``) before *before_seq*; return how many were dropped.

        For a durable backend, once those events are in its file: a long-lived session then holds no streamed
        chunk of a finished step. Chunks of a step still open stay (nothing closed them yet). Amortised O(1)
        per event: each call looks only at events after the previous call's first open chunk."""
        events = self._events
        start = self._release_from
        end = len(events)
        while end > start and events[end - 1].seq >= before_seq:
            end -= 1
        if end <= start:
            return 0
        closed: set[tuple[Any, Any]] = set()
        kept: list[SessionEvent] = []
        open_chunk = -1  # index in kept (reversed) of the earliest chunk kept
        dropped_before_derived = 0
        derived_upto = self._derived_upto
        last_where: tuple[int, int, str] | None = None  # chunks of a step share one where: decide once per run
        last_closed = False
        for index in range(end - 1, start - 1, -1):
            event = events[index]
            if type(event) is ChunkEvent:  # nearly every event: one identity test, no tuple made
                where = event.where
                if where is not last_where:
                    last_where, last_closed = where, where[:2] in closed
                if last_closed:
                    if index < derived_upto:
                        dropped_before_derived += 1
                    continue
                open_chunk = len(kept)
                kept.append(event)
                continue
            kind = event.type
            if kind == "assistant/chunk":
                data = event.data
                key: tuple[Any, Any] = (data.get("turn"), data.get("step"))
                if key in closed:
                    if index < derived_upto:
                        dropped_before_derived += 1
                    continue
                open_chunk = len(kept)
            elif kind == "assistant/message" or kind == "step/end":
                data = event.data
                closed.add((data.get("turn"), data.get("step")))
            kept.append(event)
        dropped = (end - start) - len(kept)
        kept.reverse()
        if dropped:
            events[start:end] = kept
            self._derived_upto = derived_upto - dropped_before_derived
        self._release_from = start + (len(kept) - 1 - open_chunk if open_chunk >= 0 else len(kept))
        return dropped

    def derive_messages(self) -> list[Message]:
        """The conversation as model messages (reference §6.2): a new list of shared, read-only messages.

        Cost: O(events appended since the last call) plus one copy of the list's pointers."""
        events = self._events
        derived = self._derived
        for index in range(self._derived_upto, len(events)):
            event = events[index]
            kind = event.type
            if kind == "context/reset":  # /clear: the model sees nothing from before it
                derived.clear()  # handed-out lists are copies: they keep what they had
                self._summary = None
                continue
            if kind == "context/rewind":  # /rewind N: the turns from seq ``to`` on leave the model's view
                self._rewind(event)
                continue
            if kind == COMPACTION_EVENT:
                self._compact(event)
                continue
            if kind == PRUNE_EVENT:
                self._prune(event)
                continue
            message = _derive_one(event, self._provider_ids)
            if message is not None:
                derived.append(DerivedMessage(message, event.seq))
        self._derived_upto = len(events)
        return cast(list[Message], list(derived))

    def view(self) -> list[tuple[int, Message]]:
        """The derived messages still in view, each with the seq of the event it came from, the current summary's
        message left out (see :attr:`summary`)."""
        self.derive_messages()
        standing = self._summary[1] if self._summary is not None else None
        return [(m.seq, cast(Message, m)) for m in self._derived if m is not standing]

    @property
    def summary(self) -> str | None:
        """The text of the compaction summary in view (None before any compaction, or after ``context/reset``)."""
        self.derive_messages()
        return self._summary[0] if self._summary is not None else None

    def messages_before(self, upto: int, keep: Sequence[int] = ()) -> tuple[str | None, list[Message]]:
        """The current summary's text (None before any compaction) and the derived messages still in view that
        come from events before seq *upto* (those of *keep* left out), the summary's message not included: what a
        compaction cutting at *upto* would summarise."""
        self.derive_messages()
        summary = self._summary
        standing = summary[1] if summary is not None else None
        kept = set(keep)
        return (
            summary[0] if summary is not None else None,
            [cast(Message, m) for m in self._derived if m is not standing and m.seq < upto and m.seq not in kept],
        )

    def _rewind(self, event: SessionEvent) -> None:
        """Drop the derived messages of events from seq ``to`` on (and a summary made there): the log keeps them."""
        to = event.data.get("to")
        if type(to) is not int:
            return  # not a rewind this version understands: the view stays as it was
        if self._summary is not None and self._summary[1].seq >= to:
            self._summary = None
        self._derived[:] = [m for m in self._derived if m.seq < to]

    def _compact(self, event: SessionEvent) -> None:
        """Apply a compaction to the cache (rare: linear in the view)."""
        upto, text, keep = event.data.get("upto"), event.data.get("summary"), event.data.get("keep") or []
        if not isinstance(upto, int) or not isinstance(text, str) or not isinstance(keep, list):
            return  # not a compaction this version understands: the view stays as it was
        kept_seqs = {seq for seq in keep if type(seq) is int}
        previous = self._summary[1] if self._summary is not None else None
        standing = DerivedMessage(summary_message(text), event.seq)
        kept = [m for m in self._derived if m is not previous and (m.seq >= upto or m.seq in kept_seqs)]
        self._derived[:] = [standing, *kept]
        self._summary = (text, standing)

    def _prune(self, event: SessionEvent) -> None:
        """Apply a prune to the cache (rare: linear in the view): each named tool result becomes its stub."""
        results = event.data.get("results")
        if not isinstance(results, list):
            return
        stubs: dict[int, str] = {}
        for entry in results:
            if isinstance(entry, dict) and type(entry.get("seq")) is int and isinstance(entry.get("stub"), str):
                stubs[entry["seq"]] = entry["stub"]
        derived = self._derived
        for index, message in enumerate(derived):
            stub = stubs.get(message.seq)
            if stub is None:
                continue
            block = message["content"][0] if len(message["content"]) == 1 else None
            if block is None or block.get("type") != "tool-result":
                continue
            replaced: ContentBlock = {
                "type": "tool-result",
                "tool_call_id": block["tool_call_id"],
                "content": [{"type": "text", "text": stub}],
                "is_error": bool(block.get("is_error", False)),
            }
            derived[index] = DerivedMessage({"role": "user", "content": [replaced]}, message.seq)


def summary_message(summary: str) -> Message:
    """The user message that stands for a compacted range of the conversation."""
    text = (
        "The earlier part of this conversation was compacted to save context; this summary replaces it:\n\n"
        f"<summary>\n{summary}\n</summary>"
    )
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def _copy_text_chunk(data: Any) -> dict[str, Any] | None:
    """The copy of a text chunk's data ``{"turn", "step", "chunk": {"type", "text"}}`` (the shape the loop
    appends for nearly every event of a turn) without the general walk; None for any other shape."""
    if type(data) is dict and len(data) == 3:
        chunk, turn, step = data.get("chunk"), data.get("turn"), data.get("step")
        if type(chunk) is dict and len(chunk) == 2 and type(turn) is int and type(step) is int:
            kind, text = chunk.get("type"), chunk.get("text")
            if type(kind) is str and type(text) is str:
                return {"turn": turn, "step": step, "chunk": {"type": kind, "text": text}}
    return None


def _wrap(tag: str, source: Any, content: list[ContentBlock]) -> Message:
    kind = source.get("kind", "user") if isinstance(source, dict) else "user"
    opening: ContentBlock = {"type": "text", "text": f"<{tag} source={json.dumps(kind)}>"}
    closing: ContentBlock = {"type": "text", "text": f"</{tag}>"}
    return {"role": "user", "content": [opening, *content, closing]}


def _as_provider_sent(content: list[Any], provider_ids: dict[str, str]) -> list[ContentBlock]:
    """An assistant message's blocks as the provider sent them: a tool call the loop gave a session-unique id
    (``provider_id`` set, see ``dsh.loop._call_ids``) goes back with the provider's own id, and the mapping is
    noted in *provider_ids* for the call's result (which follows it in the log)."""
    blocks: list[ContentBlock] = list(content)
    for index, block in enumerate(blocks):
        if block["type"] == "tool-call" and isinstance(block.get("provider_id"), str):
            provider: dict[str, Any] = dict(block)
            provider["id"] = provider_ids[block["id"]] = provider.pop("provider_id")
            blocks[index] = cast(ContentBlock, provider)
    return blocks


def _derive_one(event: SessionEvent, provider_ids: dict[str, str]) -> Message | None:
    data = event.data
    match event.type:
        case "user/message":
            return {"role": "user", "content": list(data["content"])}
        case "assistant/message":
            return {"role": "assistant", "content": _as_provider_sent(data["content"], provider_ids)}
        case "tool/result":
            block: ContentBlock = {
                "type": "tool-result",
                "tool_call_id": provider_ids.get(data["call_id"], data["call_id"]),
                "content": list(data["content"]),
                "is_error": bool(data.get("is_error", False)),
            }
            return {"role": "user", "content": [block]}
        case "context/message":
            return _wrap("context", data.get("source"), list(data["content"]))
        case "steering/message":
            return _wrap("steering", data.get("source"), list(data["content"]))
    return None
