"""The replay's comparison (``dsh.recording``): what "equal modulo ids, times and paths" admits and refuses."""

from __future__ import annotations

from dsh.recording._compare import Pairing, describe, equal


def _update(session: str, text: str) -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": session, "update": {"sessionUpdate": "agent_message_chunk", "content": {"text": text}}},
    }


def test_ids_are_paired_once_and_then_held() -> None:
    pairing = Pairing()
    assert equal(_update("rec-session-1", "hi"), _update("new-session-9", "hi"), pairing)
    assert equal(_update("rec-session-1", "hi"), _update("new-session-9", "hi"), pairing)
    assert not equal(_update("rec-session-1", "hi"), _update("other-session", "hi"), pairing.copy())
    assert not equal(_update("rec-session-1", "hi"), _update("new-session-9", "ho"), pairing.copy())
    # inside texts, the replay's id is read as the recorded one
    assert equal(
        _update("rec-session-1", "file rec-session-1.jsonl"),
        _update("new-session-9", "file new-session-9.jsonl"),
        pairing,
    )


def test_times_match_times_only() -> None:
    pairing = Pairing()
    stamp = {"params": {"updatedAt": "2026-12-01T15:00:00Z"}}
    assert equal(stamp, {"params": {"updatedAt": "2027-01-02T03:04:05.123+00:00"}}, pairing)
    assert not equal(stamp, {"params": {"updatedAt": "yesterday"}}, pairing)


def test_paths_are_mapped_in_one_pass() -> None:
    """The replay's data directory lies under the directory that stands for the recorded cwd: a replaced path is
    not replaced again."""
    pairing = Pairing({"/tmp/replay/data": "/tmp/rec/dsh-data", "/tmp": "/tmp/rec"})
    got = _update("s", "Session file: /tmp/replay/data/s.jsonl; cwd /tmp")
    expected = _update("s", "Session file: /tmp/rec/dsh-data/s.jsonl; cwd /tmp/rec")
    assert equal(expected, got, pairing)
    assert pairing.as_replayed("/tmp/rec/a.txt") == "/tmp/a.txt"


def test_the_daemons_request_ids_are_paired_for_the_answers() -> None:
    pairing = Pairing()
    recorded = {"jsonrpc": "2.0", "id": 4, "method": "session/request_permission", "params": {"sessionId": "a"}}
    replayed = {"jsonrpc": "2.0", "id": 7, "method": "session/request_permission", "params": {"sessionId": "b"}}
    assert equal(recorded, replayed, pairing)
    assert pairing.requests == {4: 7}
    assert describe(recorded) == "session/request_permission request"
    assert describe({"jsonrpc": "2.0", "id": 3, "result": {}}) == "answer to request 3"
