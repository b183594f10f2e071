"""The sessions service: the append-only log, the live store and derived messages (``dsh.services.sessions``)."""

from __future__ import annotations

import copy
import json
import math
import os
import time
from collections.abc import Callable
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh import events as ev
from dsh.kernel import Context, plugin
from dsh.services.sessions import (
    NotJsonError,
    Session,
    SessionEvent,
    SessionHeader,
    SessionStore,
    sessions_plugin,
)
from tests.conftest import Recorder

ABS = os.path.abspath(os.sep)


PLUGINS = (sessions_plugin,)
"""What the shared ``ctx`` fixture (``tests/conftest.py``) loads, in order."""


@pytest.fixture
def store(ctx: Context) -> SessionStore:
    return ctx.sessions


def _event(seq: int, type: str = "x", data: dict[str, Any] | None = None) -> SessionEvent:
    return SessionEvent(type, seq, 1000.0 + seq, data if data is not None else {"n": seq})


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


# -- the envelope -------------------------------------------------------------------------------------------


async def test_append_builds_the_envelope_and_seq_equals_index(store: SessionStore) -> None:
    session = store.create()
    before = time.time()
    first = session.append("user/message", {"content": [_text("hi")]})
    second = session.append("turn/start", {"turn": 0})

    assert session.events == (first, second)
    assert [e.seq for e in session.events] == [0, 1]
    assert session.seq == 2
    assert first.to_json() == {
        "type": "user/message",
        "seq": 0,
        "time": first.time,
        "data": {"content": [_text("hi")]},
    }
    assert before <= first.time <= second.time


async def test_events_view_is_a_snapshot(store: SessionStore) -> None:
    session = store.create()
    session.append("a", {})
    view = session.events
    session.append("b", {})
    assert len(view) == 1
    assert isinstance(view, tuple)


async def test_append_copies_data(store: SessionStore) -> None:
    session = store.create()
    data: dict[str, Any] = {"content": [_text("original")], "nested": {"k": [1, 2]}}
    event = session.append("user/message", data)

    data["content"][0]["text"] = "mutated"
    data["nested"]["k"].append(3)
    data["new"] = True

    assert session.events[0].data == {"content": [_text("original")], "nested": {"k": [1, 2]}}
    assert event.data is not data


async def test_append_converts_tuples_to_lists(store: SessionStore) -> None:
    session = store.create()
    event = session.append("x", {"pair": (1, 2)})
    assert event.data == {"pair": [1, 2]}


@pytest.mark.parametrize(
    "bad",
    [
        {"v": math.nan},
        {"v": math.inf},
        {"v": -math.inf},
        {"v": [1, {"deep": math.nan}]},
        {1: "non-string key"},
        {"v": {None: 1}},
        {"v": {1, 2}},
        {"v": object()},
        {"v": b"bytes"},
        {"v": 1j},
        {"v": frozenset()},
    ],
    ids=["nan", "inf", "-inf", "nested-nan", "int-key", "none-key", "set", "object", "bytes", "complex", "frozenset"],
)
async def test_append_rejects_non_json_and_leaves_log_unchanged(
    store: SessionStore, recorder: Recorder, ctx: Context, bad: dict[Any, Any]
) -> None:
    session = store.create()
    session.append("ok", {"n": 0})
    ctx.on(ev.SESSION_EVENT, recorder.listener("event"))

    with pytest.raises(NotJsonError):
        session.append("bad", bad)

    assert [e.type for e in session.events] == ["ok"]
    assert session.seq == 1
    assert recorder.calls == []
    assert session.append("next", {}).seq == 1


async def test_not_json_error_names_the_path(store: SessionStore) -> None:
    session = store.create()
    with pytest.raises(NotJsonError, match=r"bad\.outer\[1\]\.inner"):
        session.append("bad", {"outer": [0, {"inner": math.nan}]})


def test_not_json_error_is_a_value_error() -> None:
    assert issubclass(NotJsonError, ValueError)


# -- session/event ------------------------------------------------------------------------------------------


async def test_session_event_is_emitted_synchronously_after_the_push(store: SessionStore, ctx: Context) -> None:
    seen: list[tuple[Session, SessionEvent, tuple[SessionEvent, ...]]] = []
    ctx.on(ev.SESSION_EVENT, lambda s, e: seen.append((s, e, tuple(s.events))))
    session = store.create()

    event = session.append("x", {"a": 1})

    # No await between append and this assertion: the emit was synchronous.
    assert len(seen) == 1
    listened_session, listened_event, log_at_emit = seen[0]
    assert listened_session is session
    assert listened_event is event
    assert log_at_emit == (event,)


async def test_listener_exception_propagates_to_append_with_event_in_log(store: SessionStore, ctx: Context) -> None:
    def fails(session: Session, event: SessionEvent) -> None:
        raise RuntimeError("listener failed")

    ctx.on(ev.SESSION_EVENT, fails)
    session = store.create()

    with pytest.raises(RuntimeError, match="listener failed"):
        session.append("x", {"a": 1})
    assert [e.type for e in session.events] == ["x"]
    assert session.seq == 1


async def test_prepared_session_does_not_emit_until_entered(store: SessionStore, ctx: Context) -> None:
    seen: list[str] = []
    ctx.on(ev.SESSION_EVENT, lambda s, e: seen.append(e.type))
    session = store.prepare("s1")
    session.append("before-enter", {})
    assert store.get("s1") is None

    store.enter(session)
    session.append("after-enter", {})

    assert seen == ["after-enter"]
    assert store.get("s1") is session


async def test_detached_session_stops_emitting_and_leaves_the_store(store: SessionStore, ctx: Context) -> None:
    seen: list[str] = []
    ctx.on(ev.SESSION_EVENT, lambda s, e: seen.append(e.type))
    session = store.prepare("s1")
    detach = store.enter(session)
    session.append("live", {})

    await detach()
    session.append("detached", {})

    assert seen == ["live"]
    assert store.get("s1") is None
    assert store.list() == []
    assert [e.type for e in session.events] == ["live", "detached"]


# -- flush --------------------------------------------------------------------------------------------------


async def test_flush_runs_listeners_in_parallel(store: SessionStore, ctx: Context) -> None:
    a_started, b_started = anyio.Event(), anyio.Event()
    flushed: list[tuple[str, Session]] = []

    async def a(session: Session) -> None:
        a_started.set()
        await b_started.wait()
        flushed.append(("a", session))

    async def b(session: Session) -> None:
        b_started.set()
        await a_started.wait()
        flushed.append(("b", session))

    ctx.on(ev.SESSION_FLUSH, a)
    ctx.on(ev.SESSION_FLUSH, b)
    session = store.create()

    with anyio.fail_after(1):
        await store.flush(session)
    assert sorted(name for name, _ in flushed) == ["a", "b"]
    assert all(s is session for _, s in flushed)


async def test_flush_failure_propagates(store: SessionStore, ctx: Context) -> None:
    async def fails(session: Session) -> None:
        raise OSError("disk full")

    ctx.on(ev.SESSION_FLUSH, fails)
    with pytest.raises(OSError, match="disk full"):
        await store.flush(store.create())


# -- header and store ---------------------------------------------------------------------------------------


def test_header_to_json_includes_optional_keys_only_when_set() -> None:
    assert SessionHeader(id="a", created_at=1.5).to_json() == {"version": 1, "id": "a", "created_at": 1.5}
    assert SessionHeader(id="a", created_at=1.5, cwd="/w", parent_session="p").to_json() == {
        "version": 1,
        "id": "a",
        "created_at": 1.5,
        "cwd": "/w",
        "parent_session": "p",
    }


async def test_prepare_builds_header_from_meta(store: SessionStore) -> None:
    session = store.prepare("s1", meta={"cwd": ABS, "parent_session": "p0", "created_at": 123.0})
    assert session.id == "s1"
    assert session.header == SessionHeader(id="s1", created_at=123.0, cwd=ABS, parent_session="p0", version=1)
    assert session.events == ()


async def test_prepare_defaults_created_at_to_now(store: SessionStore) -> None:
    before = time.time()
    session = store.prepare("s1")
    assert before <= session.header.created_at <= time.time()
    assert session.header.cwd is None
    assert session.header.parent_session is None


async def test_prepare_keeps_an_explicit_zero_created_at(store: SessionStore) -> None:
    assert store.prepare("s1", meta={"created_at": 0}).header.created_at == 0.0


@pytest.mark.parametrize("cwd", ["relative/path", "./here", "", 42])
async def test_prepare_rejects_a_cwd_that_is_not_an_absolute_path(store: SessionStore, cwd: object) -> None:
    with pytest.raises(ValueError, match="absolute"):
        store.prepare("s1", meta={"cwd": cwd})


async def test_prepare_rejects_a_duplicate_live_id(store: SessionStore) -> None:
    store.create("taken")
    with pytest.raises(ValueError, match="already exists"):
        store.prepare("taken")


async def test_prepare_allows_an_id_that_is_only_prepared(store: SessionStore) -> None:
    store.prepare("s1")
    assert store.prepare("s1").id == "s1"  # not live yet, so not a duplicate


async def test_generated_ids_are_unique_and_skip_live_ones(store: SessionStore) -> None:
    store.create("session-2")
    ids = [store.create().id for _ in range(3)]
    assert ids == ["session-1", "session-3", "session-4"]


async def test_enter_rejects_a_duplicate_live_id(store: SessionStore) -> None:
    store.create("s1")
    other = store.prepare("s2")
    clash = Session(SessionHeader(id="s1", created_at=0.0))
    with pytest.raises(ValueError, match="already exists"):
        store.enter(clash)
    store.enter(other)
    assert {s.id for s in store.list()} == {"s1", "s2"}


async def test_create_prepares_enters_and_announces(store: SessionStore, ctx: Context, recorder: Recorder) -> None:
    seen_live: list[bool] = []

    def on_created(session: Session) -> None:
        seen_live.append(store.get(session.id) is session)
        recorder.listener("created")(session)

    ctx.on(ev.SESSION_CREATED, on_created)
    ctx.on(ev.SESSION_EVENT, recorder.listener("event"))

    session = store.create("s1", meta={"cwd": ABS})
    session.append("x", {})

    assert recorder.names() == ["created", "event"]
    assert recorder.calls[0][1] == (session,)
    assert seen_live == [True]  # announced after entering
    assert session.header.cwd == ABS


async def test_create_detaches_when_calling_scope_is_disposed(store: SessionStore, ctx: Context) -> None:
    seen: list[str] = []
    ctx.on(ev.SESSION_EVENT, lambda s, e: seen.append(e.type))
    created: list[Session] = []

    @plugin("owner", inject=("sessions",))
    def owner(pctx: Context, config: object) -> None:
        created.append(pctx.sessions.create("owned"))

    dispose = ctx.plugin(owner)
    (session,) = created
    session.append("while-live", {})
    assert store.get("owned") is session

    await dispose()
    session.append("after", {})

    assert store.get("owned") is None
    assert seen == ["while-live"]


async def test_create_with_a_scope_active_ties_the_session_to_it(store: SessionStore, ctx: Context) -> None:
    caller = ctx.fork("caller")
    with caller.scope.active():
        store.create("s1")
    assert store.get("s1") is not None
    await caller.scope.dispose()
    assert store.get("s1") is None


async def test_announce_emits_session_created(store: SessionStore, ctx: Context, recorder: Recorder) -> None:
    ctx.on(ev.SESSION_CREATED, recorder.listener("created"))
    session = store.prepare("s1")
    store.announce(session)
    assert recorder.calls == [("created", (session,))]


async def test_list_and_get(store: SessionStore) -> None:
    a = store.create("a")
    b = store.create("b")
    assert store.list() == [a, b]
    assert store.get("a") is a
    assert store.get("missing") is None


# -- seeded sessions ----------------------------------------------------------------------------------------


def test_seeded_session_keeps_events_and_continues_seq() -> None:
    seed = [_event(0), _event(1)]
    session = Session(SessionHeader(id="s", created_at=0.0), seed)
    assert session.events == tuple(seed)
    assert session.append("next", {}).seq == 2


@pytest.mark.parametrize("seqs", [[1], [0, 2], [0, 0], [0, 1, 1], [-1]])
def test_seeded_construction_rejects_non_contiguous_seqs(seqs: list[int]) -> None:
    with pytest.raises(ValueError, match="contiguous"):
        Session(SessionHeader(id="s", created_at=0.0), [_event(seq) for seq in seqs])


def test_seeded_construction_rejects_non_json_data() -> None:
    with pytest.raises(NotJsonError):
        Session(SessionHeader(id="s", created_at=0.0), [_event(0, data={"v": math.nan})])


async def test_prepare_with_seed(store: SessionStore) -> None:
    session = store.prepare("s1", seed=[_event(0), _event(1)])
    assert session.seq == 2
    with pytest.raises(ValueError):
        store.prepare("s2", seed=[_event(1)])


def test_session_event_from_json_round_trip_and_validation() -> None:
    event = SessionEvent("x", 3, 1.5, {"a": [1]})
    assert SessionEvent.from_json(event.to_json()) == event
    with pytest.raises(ValueError):
        SessionEvent.from_json({"type": "x", "seq": "0", "data": {}})
    with pytest.raises(ValueError):
        SessionEvent.from_json({"type": "x", "seq": 0, "data": []})


def test_last_finds_most_recent_event_of_given_types() -> None:
    session = Session(SessionHeader(id="s", created_at=0.0))
    session.append("a", {"n": 1})
    session.append("b", {"n": 2})
    session.append("a", {"n": 3})
    assert session.last("a") is session.events[2]
    assert session.last("b", "c") is session.events[1]
    assert session.last("c") is None


# -- derive_messages (reference §6.2) -----------------------------------------------------------------------


FULL_LOG: list[tuple[str, dict[str, Any]]] = [
    ("turn/start", {"turn": 0, "trigger": {"kind": "message", "source": {"kind": "user"}}}),
    ("user/message", {"content": [_text("hello")], "source": {"kind": "user"}}),
    ("step/start", {"turn": 0, "step": 0}),
    ("assistant/chunk", {"turn": 0, "step": 0, "chunk": {"type": "text-delta", "text": "x"}}),
    (
        "assistant/message",
        {
            "turn": 0,
            "step": 0,
            "content": [_text("calling"), {"type": "tool-call", "id": "c1", "name": "read", "arguments": "{}"}],
        },
    ),
    ("usage", {"turn": 0, "step": 0, "usage": {"input_tokens": 3}}),
    ("tool/call", {"turn": 0, "step": 0, "call_id": "c1", "name": "read", "arguments": {}}),
    ("tool/result", {"turn": 0, "step": 0, "call_id": "c1", "content": [_text("file body")], "is_error": True}),
    ("step/end", {"turn": 0, "step": 0}),
    ("context/message", {"content": [_text("ctx")], "source": {"kind": "plugin", "plugin": "p"}}),
    ("steering/message", {"turn": 0, "content": [_text("steer")], "source": {"kind": "user"}}),
    ("error", {"turn": 0, "step": 1, "message": "boom", "code": "X"}),
    ("turn/end", {"turn": 0, "reason": {"kind": "completed"}}),
]


def _full_log(session: Session) -> None:
    for type_, data in FULL_LOG:
        session.append(type_, data)


EXPECTED_MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": [_text("hello")]},
    {
        "role": "assistant",
        "content": [_text("calling"), {"type": "tool-call", "id": "c1", "name": "read", "arguments": "{}"}],
    },
    {
        "role": "user",
        "content": [{"type": "tool-result", "tool_call_id": "c1", "content": [_text("file body")], "is_error": True}],
    },
    {
        "role": "user",
        "content": [_text('<context source="plugin">'), _text("ctx"), _text("</context>")],
    },
    {
        "role": "user",
        "content": [_text('<steering source="user">'), _text("steer"), _text("</steering>")],
    },
]


def test_derive_messages_follows_reference() -> None:
    session = Session(SessionHeader(id="s", created_at=0.0))
    _full_log(session)
    assert session.derive_messages() == EXPECTED_MESSAGES


def test_derive_messages_of_only_non_message_events_is_empty() -> None:
    session = Session(SessionHeader(id="s", created_at=0.0))
    for type_ in ("turn/start", "step/start", "assistant/chunk", "usage", "error", "step/end", "turn/end", "tool/call"):
        session.append(type_, {"turn": 0})
    assert session.derive_messages() == []


def test_tool_result_without_is_error_defaults_to_false() -> None:
    session = Session(SessionHeader(id="s", created_at=0.0))
    session.append("tool/result", {"call_id": "c9", "content": []})
    assert session.derive_messages() == [
        {"role": "user", "content": [{"type": "tool-result", "tool_call_id": "c9", "content": [], "is_error": False}]}
    ]


def test_steering_source_attribute_is_the_json_quoted_kind() -> None:
    session = Session(SessionHeader(id="s", created_at=0.0))
    session.append("steering/message", {"content": [_text("a")], "source": {"kind": "agent", "agent_id": "x"}})
    session.append("context/message", {"content": [_text("b")]})  # no source: defaults to user
    messages = session.derive_messages()
    assert messages[0]["content"][0] == _text('<steering source="agent">')
    assert messages[1]["content"][0] == _text('<context source="user">')
    assert messages[1]["content"][-1] == _text("</context>")


def test_derived_messages_are_shared_read_only_and_cannot_change_the_log() -> None:
    """Messages are derived once and shared by every call (issue #12: a request costs O(new events)); the list
    is the caller's, the messages are read-only, so no caller can change the log or a later derivation."""
    session = Session(SessionHeader(id="s", created_at=0.0))
    session.append("user/message", {"content": [_text("hello")]})
    session.append("tool/result", {"call_id": "c", "content": [_text("r")], "is_error": False})
    snapshot = copy.deepcopy(session.events)

    first = session.derive_messages()
    mutations: list[Callable[[], object]] = [
        lambda: first[0]["content"][0].__setitem__("text", "mutated"),
        lambda: first[0]["content"].append(_text("extra")),
        lambda: first[1]["content"][0]["content"].clear(),  # type: ignore[typeddict-item]
        lambda: first[0].__setitem__("role", "assistant"),
        lambda: first[0].update(role="assistant"),
        lambda: first[0]["content"].__setitem__(0, _text("swapped")),
    ]
    for mutate in mutations:
        with pytest.raises(TypeError, match="read-only"):
            mutate()
    first.append({"role": "user", "content": []})  # the list itself is the caller's
    first[0] = {"role": "user", "content": [_text("replaced in this list only")]}
    plain = copy.deepcopy(session.derive_messages())  # a deep copy is plain and mutable
    plain[0]["content"][0]["text"] = "mutated copy"  # type: ignore[typeddict-unknown-key]

    again = session.derive_messages()
    assert again == [
        {"role": "user", "content": [_text("hello")]},
        {
            "role": "user",
            "content": [{"type": "tool-result", "tool_call_id": "c", "content": [_text("r")], "is_error": False}],
        },
    ]
    assert again is not first
    assert all(a is b for a, b in zip(again, session.derive_messages(), strict=True))  # derived once, shared
    assert session.events == snapshot
    assert [type(m) for m in json.loads(json.dumps(again))] == [dict, dict]


def test_derived_messages_carry_no_token_estimate_of_their_own() -> None:
    """One token count (issue 23): the estimate is made over a whole request by ``estimate_request``, never cached
    on the shared messages (the word count that was cached there, in another unit, is gone)."""
    from dsh.services.llm import estimate_request

    session = Session(SessionHeader(id="s", created_at=0.0))
    session.append("user/message", {"content": [_text("one two"), _text("three")]})
    messages = session.derive_messages()
    assert type(messages) is list
    assert not hasattr(messages[0], "tokens")
    assert estimate_request(messages) == 3 + 4  # 12 characters / 4, plus one message's overhead


def test_incremental_derivation_equals_fresh_derivation_of_the_same_log() -> None:
    live = Session(SessionHeader(id="s", created_at=0.0))
    for count, (type_, data) in enumerate(FULL_LOG, start=1):
        live.append(type_, data)
        incremental = live.derive_messages()  # extends the cache one event at a time
        fresh = Session(SessionHeader(id="p", created_at=0.0), list(live.events[:count]))
        assert incremental == fresh.derive_messages()

    assert live.derive_messages() == EXPECTED_MESSAGES


async def test_a_throwing_listener_does_not_hide_the_event_from_later_listeners(
    store: SessionStore, ctx: Context
) -> None:
    """Issue #10, item 5b: every ``session/event`` listener sees every event; the first exception still reaches the
    appender, after the event is in the log (a throwing plugin must not hide a turn from the front end)."""
    seen: list[str] = []

    def first(session: Session, event: SessionEvent) -> None:
        raise RuntimeError("first listener broke")

    def second(session: Session, event: SessionEvent) -> None:
        raise ValueError("second listener broke")

    ctx.on(ev.SESSION_EVENT, first, prepend=True)
    ctx.on(ev.SESSION_EVENT, second)
    ctx.on(ev.SESSION_EVENT, lambda session, event: seen.append(event.type))
    session = store.create()
    with pytest.raises(RuntimeError, match="first listener broke"):
        session.append("x", {"a": 1})
    assert seen == ["x"]
    assert [e.type for e in session.events] == ["x"]


# -- the chunk path (issue #12) ------------------------------------------------------------------------------


@given(
    kind=st.sampled_from(["text-delta", "reasoning-delta"]),
    texts=st.lists(st.text(), min_size=1, max_size=5),
    turn=st.integers(0, 10**6),
    step=st.integers(0, 10**6),
)
def test_append_chunk_is_append_of_the_text_chunk_without_the_dicts(
    kind: str, texts: list[str], turn: int, step: int
) -> None:
    """``append_chunk`` is the loop's path for every text delta: the event it logs and notifies equals what
    ``append("assistant/chunk", ...)`` would give, its file line and its ``session/update`` frame are the very
    bytes the general encoders give for that event, and it holds no dict of the caller's."""
    from dsh.frontends.acp._projection import encode_chunk_frame, encode_update, project, update_frame_prefix
    from dsh.plugins.persistence._format import encode_event
    from dsh.services.sessions import ChunkEvent

    fast = Session(SessionHeader(id="s", created_at=0.0))
    general = Session(SessionHeader(id="s", created_at=0.0))
    seen: list[SessionEvent] = []
    fast._hook = lambda session, event: seen.append(event)
    for text in texts:
        event = fast.append_chunk(turn, step, kind, text)
        plain = general.append("assistant/chunk", {"turn": turn, "step": step, "chunk": {"type": kind, "text": text}})
        assert type(event) is ChunkEvent
        assert event.text == text and event.where == (turn, step, kind)
        assert SessionEvent(event.type, event.seq, event.time, event.data) == event
        assert event.to_json() == {**plain.to_json(), "time": event.time}
        same_time = SessionEvent(plain.type, plain.seq, event.time, plain.data)
        assert encode_event(event) == encode_event(same_time)
        (update,) = project(same_time)
        assert encode_chunk_frame(update_frame_prefix("s"), event) == (
            update_frame_prefix("s") + encode_update(update) + b"}}"
        )
    assert seen == list(fast.events)
    assert len({id(e.where) for e in fast.events}) == 1, "one where tuple per step"
    assert [e.seq for e in fast.events] == list(range(len(texts)))


def test_held_chunks_cost_their_size_not_an_encoder_buffer() -> None:
    """A chunk's stored JSON text is a right-sized object: orjson's result keeps its ~4 KiB buffer, so a session
    holding a million chunks (a live turn before its chunks are released, a loaded session) would cost GBs
    (issue #12 item 5; 393 MB RSS per 100k chunks measured). Live chunks, ``json_string`` and loaded chunks."""
    import tracemalloc

    from dsh.plugins.persistence._format import scan
    from dsh.services.sessions._json import json_string

    count = 2000
    lines = [json.dumps({"type": "session", "version": 1, "id": "s", "created_at": 1.0}).encode()]
    lines += [
        json.dumps(
            {
                "type": "assistant/chunk",
                "seq": i,
                "time": 1.5,
                "data": {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "text": f"w{i} "}},
            },
            separators=(",", ":"),
        ).encode()
        for i in range(count)
    ]
    content = b"\n".join(lines) + b"\n"
    session = Session(SessionHeader(id="s", created_at=0.0))
    tracemalloc.start()
    try:
        for label, make in (
            ("json_string", lambda: [json_string(f"w{i} ") for i in range(count)]),
            (
                "Session.append_chunk",
                lambda: [session.append_chunk(1, 1, "text-delta", f"w{i} ") for i in range(count)],
            ),
            ("a loaded chunk", lambda: scan(content, "s.jsonl").events),
        ):
            before = tracemalloc.get_traced_memory()[0]
            held = make()
            per_chunk = (tracemalloc.get_traced_memory()[0] - before) / count
            assert per_chunk < 400, f"{label}: {per_chunk:.0f} bytes per held chunk"
            assert len(held) == count
            del held
    finally:
        tracemalloc.stop()


def test_events_without_chunks_is_the_log_without_assistant_chunks() -> None:
    """The filtered walk resumed sessions use (context figures, rules, choices, title, current turn)."""
    session = Session(SessionHeader(id="s", created_at=0.0))
    session.append("turn/start", {"turn": 1})
    session.append_chunk(1, 1, "text-delta", "a")
    session.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "usage", "usage": {}}})
    session.append("user/message", {"content": []})
    session.append_chunk(1, 1, "reasoning-delta", "b")
    session.append("turn/end", {"turn": 1})
    kept = session.events_without_chunks()
    assert [event.type for event in kept] == ["turn/start", "user/message", "turn/end"]
    assert kept == [event for event in session.events if event.type != "assistant/chunk"]
    with pytest.raises(ValueError, match="seeded event 1 has seq 2"):
        Session(SessionHeader(id="t", created_at=0.0), [session.events[0], session.events[2]])


async def test_a_listener_that_ignores_text_chunks_gets_every_other_event_in_order(
    store: SessionStore, ctx: Context
) -> None:
    """``ignores_text_chunks`` (issue #12): the session skips a marked ``session/event`` listener for streamed
    text chunks only; every listener still sees every other event in registration order, and a listener added
    or removed later is honoured at once (the skip list follows the bus)."""
    from dsh.services.sessions import ignores_text_chunks

    seen: list[tuple[str, str]] = []

    class Plugin:
        @ignores_text_chunks
        def marked(self, session: Session, event: SessionEvent) -> None:
            seen.append(("marked", event.type))

    ctx.on(ev.SESSION_EVENT, Plugin().marked)
    ctx.on(ev.SESSION_EVENT, lambda session, event: seen.append(("plain", event.type)))
    session = store.create()
    session.append("turn/start", {"turn": 1})
    session.append_chunk(1, 1, "text-delta", "a ")
    session.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "usage", "usage": {}}})
    assert seen == [
        ("marked", "turn/start"),
        ("plain", "turn/start"),
        ("plain", "assistant/chunk"),
        ("marked", "assistant/chunk"),  # not a text chunk: every listener
        ("plain", "assistant/chunk"),
    ]
    seen.clear()
    remove = ctx.app.bus.add(ev.SESSION_EVENT.name, lambda session, event: seen.append(("late", event.type)))
    session.append_chunk(1, 1, "text-delta", "b ")
    remove()
    session.append_chunk(1, 1, "text-delta", "c ")
    assert seen == [("plain", "assistant/chunk"), ("late", "assistant/chunk"), ("plain", "assistant/chunk")]
