"""Session events → ``session/update`` payloads: the mapping table of ``_projection``, line by line.

Every update produced here is validated against the official SDK's models (``acp.schema``) and must
round-trip through them unchanged (the SDK ignores unknown keys, so a misspelt key would otherwise pass).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from acp.schema import SessionNotification
from hypothesis import given
from hypothesis import strategies as st

from dsh.frontends.acp._projection import failed_update, project, tool_kind
from dsh.services.sessions import SessionEvent

TOOL_KINDS = {"read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"}


def event(kind: str, data: dict[str, Any], seq: int = 0) -> SessionEvent:
    return SessionEvent(kind, seq, 1_700_000_000.0, data)


def validated(update: dict[str, Any]) -> dict[str, Any]:
    """*update* checked against the SDK's ``SessionNotification`` union; returns the SDK's own dump of it."""
    notification = SessionNotification.model_validate({"sessionId": "s", "update": update})
    dumped: dict[str, Any] = notification.update.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return dumped


def assert_valid(updates: list[dict[str, Any]]) -> None:
    for update in updates:
        assert validated(update) == update
        json.dumps(update, allow_nan=False)  # strict JSON: what goes on the wire must parse anywhere


def chunk(turn: int, step: int, body: dict[str, Any]) -> SessionEvent:
    return event("assistant/chunk", {"turn": turn, "step": step, "chunk": body})


# -- assistant/chunk -------------------------------------------------------------------------------------


def test_text_delta_is_an_agent_message_chunk_with_a_turn_and_step_message_id() -> None:
    updates = project(chunk(3, 2, {"type": "text-delta", "text": "Hel"}))
    assert updates == [
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Hel"}, "messageId": "m3.2"}
    ]
    assert_valid(updates)


def test_chunks_of_one_message_share_a_message_id_and_a_new_step_or_turn_changes_it() -> None:
    def message_id(turn: int, step: int, text: str) -> str:
        (update,) = project(chunk(turn, step, {"type": "text-delta", "text": text}))
        return str(update["messageId"])

    assert message_id(1, 0, "a") == message_id(1, 0, "b") == message_id(1, 0, " c")
    ids = {message_id(1, 0, "x"), message_id(1, 1, "x"), message_id(2, 0, "x"), message_id(2, 1, "x")}
    assert len(ids) == 4
    assert message_id(1, 11, "x") != message_id(11, 1, "x")


def test_reasoning_delta_is_an_agent_thought_chunk_with_its_own_message_id() -> None:
    updates = project(chunk(3, 2, {"type": "reasoning-delta", "text": "hmm"}))
    assert updates == [
        {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hmm"}, "messageId": "t3.2"}
    ]
    assert_valid(updates)
    (text,) = project(chunk(3, 2, {"type": "text-delta", "text": "hmm"}))
    assert updates[0]["messageId"] != text["messageId"]


@pytest.mark.parametrize(
    "body",
    [
        {"type": "tool-call-delta", "id": "c1", "name": "read_file", "arguments_delta": '{"pa'},
        {"type": "block-end", "block": {"type": "text", "text": "Hello"}},
        {"type": "usage", "usage": {"input_tokens": 3, "output_tokens": 5}},
        {"type": "finish", "reason": {"kind": "stop"}},
        {"type": "finish", "reason": {"kind": "error", "message": "boom"}},
        {"type": "something-new"},
    ],
    ids=lambda body: body["type"],
)
def test_other_chunks_project_to_nothing(body: dict[str, Any]) -> None:
    assert project(chunk(1, 0, body)) == []
    assert project(chunk(1, 0, body), replay=True) == []


# -- tool/call ------------------------------------------------------------------------------------------


def tool_call(name: str = "read_file", arguments: str = '{"path": "/a"}', call_id: str = "call-1") -> SessionEvent:
    return event("tool/call", {"turn": 1, "step": 0, "call_id": call_id, "name": name, "arguments": arguments})


def test_tool_call_is_a_pending_tool_call_with_title_kind_and_parsed_raw_input() -> None:
    """Issue #11: the card is pending until the permission gate lets it run (then in_progress)."""
    updates = project(tool_call("read_file", '{"path": "/a", "limit": 3}', "call-7"))
    assert updates == [
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "call-7",
            "title": "read_file",
            "kind": "read",
            "status": "pending",
            "rawInput": {"path": "/a", "limit": 3},
        }
    ]
    assert_valid(updates)


@pytest.mark.parametrize(
    ("arguments", "raw_input"),
    [
        ('{"a": [1, 2.5, null, true]}', {"a": [1, 2.5, None, True]}),
        ("[1, 2]", [1, 2]),
        ('"just a string"', "just a string"),
        ("42", 42),
        ("{oops", "{oops"),
        ('{"a": 1', '{"a": 1'),
        ("not json at all", "not json at all"),
        ("", {}),
        ("   \n\t", {}),
    ],
    ids=["object", "array", "string", "number", "broken", "truncated", "prose", "empty", "whitespace"],
)
def test_tool_call_raw_input(arguments: str, raw_input: Any) -> None:
    (update,) = project(tool_call(arguments=arguments))
    assert update["rawInput"] == raw_input
    assert_valid([update])


@pytest.mark.parametrize("arguments", ["NaN", '{"x": NaN}', "Infinity", '{"x": -Infinity}', "1e999", "[1e400]"])
def test_tool_call_raw_input_never_puts_non_finite_numbers_on_the_wire(arguments: str) -> None:
    (update,) = project(tool_call(arguments=arguments))
    json.dumps(update, allow_nan=False)
    if "NaN" in arguments or "Infinity" in arguments:
        assert update["rawInput"] == arguments  # not JSON: passed on as the raw string


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("read_file", "read"),
        ("Read", "read"),
        ("cat", "read"),
        ("write_file", "edit"),
        ("edit", "edit"),
        ("apply_patch", "edit"),
        ("delete_file", "delete"),
        ("rm", "delete"),
        ("move_file", "move"),
        ("rename", "move"),
        ("grep", "search"),
        ("glob", "search"),
        ("list_dir", "search"),
        ("bash", "execute"),
        ("Bash", "execute"),
        ("run_tests", "execute"),
        ("fetch_url", "fetch"),
        ("web_search", "fetch"),
        ("think", "think"),
        ("frobnicate", "other"),
        ("", "other"),
    ],
)
def test_tool_kind(name: str, kind: str) -> None:
    assert tool_kind(name) == kind
    (update,) = project(tool_call(name=name))
    assert update["kind"] == kind
    assert update["title"] == name


@given(st.text())
def test_tool_kind_is_always_an_acp_tool_kind(name: str) -> None:
    assert tool_kind(name) in TOOL_KINDS


# -- tool/result -----------------------------------------------------------------------------------------


def tool_result(
    content: list[dict[str, Any]], *, is_error: bool | None = False, call_id: str = "call-1"
) -> SessionEvent:
    data: dict[str, Any] = {"turn": 1, "step": 0, "call_id": call_id, "content": content}
    if is_error is not None:
        data["is_error"] = is_error
    return event("tool/result", data)


def test_tool_result_is_a_completed_tool_call_update_with_text_content() -> None:
    updates = project(tool_result([{"type": "text", "text": "line 1"}, {"type": "text", "text": "line 2"}]))
    assert updates == [
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "call-1",
            "status": "completed",
            "content": [
                {"type": "content", "content": {"type": "text", "text": "line 1"}},
                {"type": "content", "content": {"type": "text", "text": "line 2"}},
            ],
        }
    ]
    assert_valid(updates)


def test_an_error_tool_result_is_failed() -> None:
    data = {"turn": 1, "step": 0, "call_id": "c9", "content": [{"type": "text", "text": "no such file"}]}
    data |= {"is_error": True, "error": {"name": "FileNotFound", "code": "ENOENT"}}
    updates = project(event("tool/result", data))
    assert updates == [
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c9",
            "status": "failed",
            "content": [{"type": "content", "content": {"type": "text", "text": "no such file"}}],
        }
    ]
    assert_valid(updates)


def test_a_tool_result_without_is_error_is_completed() -> None:
    (update,) = project(tool_result([{"type": "text", "text": "ok"}], is_error=None))
    assert update["status"] == "completed"


def test_a_tool_result_shows_its_text_and_images_in_order_and_omits_empty_content() -> None:
    """RFC 0022: the card shows an image a tool returned, as the ACP image block of its data URL; an image
    that is no data URL (nothing to show) and reasoning are left out."""
    image = {"type": "image", "url": "data:image/png;base64,AAAA"}
    (mixed,) = project(tool_result([image, {"type": "text", "text": "caption"}]))
    assert mixed["content"] == [
        {"type": "content", "content": {"type": "image", "data": "AAAA", "mimeType": "image/png"}},
        {"type": "content", "content": {"type": "text", "text": "caption"}},
    ]
    (empty,) = project(tool_result([{"type": "image", "url": "https://example.com/a.png"}]))
    assert empty == {"sessionUpdate": "tool_call_update", "toolCallId": "call-1", "status": "completed"}
    (none,) = project(tool_result([], is_error=True))
    assert none == {"sessionUpdate": "tool_call_update", "toolCallId": "call-1", "status": "failed"}
    assert_valid([mixed, empty, none])


def test_failed_update_closes_an_open_tool_call() -> None:
    update = failed_update("call-3", "Cancelled by the user.")
    assert update == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "call-3",
        "status": "failed",
        "content": [{"type": "content", "content": {"type": "text", "text": "Cancelled by the user."}}],
    }
    assert_valid([update])


# -- user/message (replay only) --------------------------------------------------------------------------


def user_message(content: list[dict[str, Any]], source: Any) -> SessionEvent:
    return event("user/message", {"content": content, "source": source})


def test_a_user_message_projects_to_nothing_live() -> None:
    message = user_message([{"type": "text", "text": "hi"}], {"kind": "user", "message_id": "u1"})
    assert project(message) == []
    assert project(message, replay=False) == []


def test_a_user_message_replays_as_user_message_chunks_with_its_message_id() -> None:
    blocks = [
        {"type": "text", "text": "look at"},
        {"type": "image", "url": "data:image/png;base64,AAAA"},
        {"type": "text", "text": "this"},
    ]
    updates = project(user_message(blocks, {"kind": "user", "message_id": "u1"}), replay=True)
    assert updates == [
        {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "look at"}, "messageId": "u1"},
        {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "this"}, "messageId": "u1"},
    ]
    assert_valid(updates)


@pytest.mark.parametrize(
    "source",
    [{"kind": "user"}, {"kind": "plugin", "plugin": "x"}, None, {"kind": "user", "message_id": 5}, "user"],
    ids=["no-id", "plugin", "none", "non-string-id", "not-a-dict"],
)
def test_a_replayed_user_message_without_a_usable_message_id_has_no_message_id(source: Any) -> None:
    updates = project(user_message([{"type": "text", "text": "hi"}], source), replay=True)
    assert updates == [{"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "hi"}}]
    assert_valid(updates)


# -- everything else ---------------------------------------------------------------------------------------

OTHER_EVENTS: list[tuple[str, dict[str, Any]]] = [
    ("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}}),
    ("turn/end", {"turn": 1, "reason": {"kind": "completed"}}),
    ("step/start", {"turn": 1, "step": 0}),
    ("step/end", {"turn": 1, "step": 0}),
    ("assistant/message", {"turn": 1, "step": 0, "content": [{"type": "text", "text": "Hello"}]}),
    ("context/message", {"content": [{"type": "text", "text": "ctx"}], "source": {"kind": "plugin", "plugin": "p"}}),
    ("usage", {"turn": 1, "step": 0, "usage": {"input_tokens": 1, "output_tokens": 2}}),
    ("error", {"turn": 1, "step": 0, "message": "boom"}),
    ("plugin/custom", {"anything": True}),
]


@pytest.mark.parametrize(("kind", "data"), OTHER_EVENTS, ids=[f"{k}-{i}" for i, (k, _) in enumerate(OTHER_EVENTS)])
@pytest.mark.parametrize("replay", [False, True])
def test_every_other_event_projects_to_nothing(kind: str, data: dict[str, Any], replay: bool) -> None:
    assert project(event(kind, data), replay=replay) == []


def test_a_steer_shows_only_in_a_replay_as_a_user_chunk_marked_steer() -> None:
    data = {"turn": 1, "content": [{"type": "text", "text": "s"}], "source": {"kind": "user", "message_id": "m1"}}
    assert project(event("steering/message", data), replay=False) == []  # live, the client sent it itself
    updates = project(event("steering/message", data), replay=True)
    assert updates == [
        {
            "sessionUpdate": "user_message_chunk",
            "content": {"type": "text", "text": "s"},
            "messageId": "m1",
            "_meta": {"dsh": {"steer": True}},
        }
    ]
    assert_valid(updates)


@pytest.mark.parametrize(("kind", "ended"), [("aborted", "cancelled"), ("interrupted", "interrupted")])
def test_a_replayed_turn_that_did_not_end_normally_is_marked_for_the_client(kind: str, ended: str) -> None:
    """Issue 43: a resumed cancelled turn says so. Live, the prompt's stop reason says it; a replay has no prompt
    answer, so it marks the turn with ``_meta.dsh.turnEnd`` on a ``session_info_update`` (valid ACP, shown by
    nothing that does not know it)."""
    end = event("turn/end", {"turn": 1, "reason": {"kind": kind, "reason": "session/cancel"}})
    assert project(end) == []
    updates = project(end, replay=True)
    assert updates == [{"sessionUpdate": "session_info_update", "_meta": {"dsh": {"turnEnd": ended}}}]
    assert_valid(updates)


# -- properties ------------------------------------------------------------------------------------------

texts = st.text(max_size=30)
ints = st.integers(0, 10_000)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)
not_quite_json = st.sampled_from(["NaN", '{"x": NaN}', "-Infinity", "1e999", "[1e400]", "{oops", "", "  "])
arguments = st.one_of(json_values.map(json.dumps), texts, not_quite_json)
llm_blocks = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, texts),
    st.builds(lambda u: {"type": "image", "url": u}, texts),
    st.builds(lambda t: {"type": "reasoning", "text": t}, texts),
)
stream_chunks = st.one_of(
    st.builds(lambda t: {"type": "text-delta", "text": t}, texts),
    st.builds(lambda t: {"type": "reasoning-delta", "text": t}, texts),
    st.builds(lambda i, a: {"type": "tool-call-delta", "id": i, "arguments_delta": a}, texts, texts),
    st.builds(lambda b: {"type": "block-end", "block": b}, llm_blocks),
    st.just({"type": "usage", "usage": {"input_tokens": 1}}),
    st.just({"type": "finish", "reason": {"kind": "stop"}}),
)
sources = st.one_of(
    st.none(),
    st.fixed_dictionaries({"kind": st.just("user")}, optional={"message_id": texts}),
    st.fixed_dictionaries({"kind": st.just("plugin"), "plugin": texts}),
)
events = st.one_of(
    st.builds(lambda t, s, c: event("assistant/chunk", {"turn": t, "step": s, "chunk": c}), ints, ints, stream_chunks),
    st.builds(
        lambda c, n, a: event("tool/call", {"turn": 1, "step": 0, "call_id": c, "name": n, "arguments": a}),
        texts,
        texts,
        arguments,
    ),
    st.builds(
        lambda c, b, e: event("tool/result", {"turn": 1, "step": 0, "call_id": c, "content": b, "is_error": e}),
        texts,
        st.lists(llm_blocks, max_size=4),
        st.booleans(),
    ),
    st.builds(
        lambda b, s: event("user/message", {"content": b, "source": s}), st.lists(llm_blocks, max_size=4), sources
    ),
    st.sampled_from([event(kind, data) for kind, data in OTHER_EVENTS]),
)


@given(events, st.booleans())
def test_projection_is_a_pure_function_and_every_output_validates(item: SessionEvent, replay: bool) -> None:
    before = copy.deepcopy(item.data)
    first = project(item, replay=replay)
    second = project(item, replay=replay)
    assert first == second
    assert item.data == before  # the event is never modified
    assert_valid(first)
    if item.type not in ("user/message", "turn/end"):
        assert project(item, replay=not replay) == first  # live and replay share every other mapping


# -- encode_update: a faster serializer, byte for byte the same as compact UTF-8 json.dumps -------------------


def _compact_utf8(value: Any) -> bytes:
    """What dsh writes (orjson): compact UTF-8 JSON; a string with a lone surrogate (not UTF-8) makes the
    value ASCII-escaped, the one spelling of it that is valid UTF-8."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return json.dumps(value, separators=(",", ":")).encode()


@given(st.sampled_from(["text-delta", "reasoning-delta"]), st.text(), st.integers(0, 10**6), st.integers(0, 10**6))
def test_encode_update_of_a_projected_text_chunk_equals_json_dumps(
    chunk_type: str, text: str, turn: int, step: int
) -> None:
    from dsh.frontends.acp._projection import encode_update

    event = SessionEvent(
        "assistant/chunk", 0, 0.0, {"turn": turn, "step": step, "chunk": {"type": chunk_type, "text": text}}
    )
    (update,) = project(event)
    assert encode_update(update) == _compact_utf8(update)
    assert json.loads(encode_update(update)) == update


@pytest.mark.parametrize(
    "update",
    [
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "x"}},
        {"sessionUpdate": "agent_message_chunk", "messageId": "m", "content": {"type": "text", "text": "x"}},
        {"sessionUpdate": "agent_message_chunk", "content": {"text": "x", "type": "text"}, "messageId": "m"},
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "image", "data": "x"}, "messageId": "m"},
        {"sessionUpdate": "tool_call", "toolCallId": "c", "title": "t", "kind": "other", "status": "in_progress"},
    ],
)
def test_encode_update_of_any_other_shape_equals_json_dumps(update: dict[str, Any]) -> None:
    from dsh.frontends.acp._projection import encode_update

    assert encode_update(update) == _compact_utf8(update)


def test_tool_running_is_the_cards_in_progress_update() -> None:
    """Issue #11: the permission gate logs ``tool/running`` when it lets a call run; live and replay alike."""
    event = SessionEvent("tool/running", 3, 1_700_000_000.0, {"call_id": "call-7"})
    expected = [{"sessionUpdate": "tool_call_update", "toolCallId": "call-7", "status": "in_progress"}]
    assert project(event) == expected
    assert project(event, replay=True) == expected
    assert_valid(expected)


@given(st.sampled_from(["text-delta", "reasoning-delta"]), st.text(), st.integers(0, 10**6), st.integers(0, 10**6))
def test_encode_chunk_frame_of_a_loaded_chunk_equals_the_general_path(
    chunk_type: str, text: str, turn: int, step: int
) -> None:
    """The frame of a loaded chunk (issue #12: live chunks and replays use it) is the very bytes of project +
    encode_update around the session's prefix."""
    from dsh.frontends.acp._projection import encode_chunk_frame, encode_update, update_frame_prefix
    from dsh.services.sessions import ChunkEvent

    loaded = ChunkEvent(0, 0.0, turn, step, chunk_type, text)
    plain = SessionEvent("assistant/chunk", 0, 0.0, loaded.data)
    (update,) = project(plain, replay=True)
    assert project(loaded, replay=True) == [update]
    prefix = update_frame_prefix("session-1")
    assert encode_chunk_frame(prefix, loaded) == prefix + encode_update(update) + b"}}"
    assert encode_update(update) == _compact_utf8(update)
