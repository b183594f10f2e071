"""What a log says about turns and rewinds (``dsh.checkpoints._log``): pure functions, checked on small logs."""

from __future__ import annotations

from typing import Any

from dsh.checkpoints import in_view, turns
from dsh.checkpoints._log import FileState, rewound_ranges
from dsh.services.sessions import SessionEvent


def log(*entries: tuple[str, dict[str, Any]]) -> list[SessionEvent]:
    return [SessionEvent(kind, seq, 0.0, data) for seq, (kind, data) in enumerate(entries)]


def start(kind: str = "message") -> tuple[str, dict[str, Any]]:
    return ("turn/start", {"turn": 0, "trigger": {"kind": kind}})


def said(words: str) -> tuple[str, dict[str, Any]]:
    return ("user/message", {"content": [{"type": "text", "text": words}]})


def test_nested_and_overlapping_rewinds_leave_exactly_the_events_before_each_range() -> None:
    events = log(
        start(),
        said("one"),  # 0, 1
        start(),
        said("two"),  # 2, 3
        ("context/rewind", {"to": 2}),  # 4: turn two out of view
        start(),
        said("three"),  # 5, 6
        start(),
        said("four"),  # 7, 8
        ("context/rewind", {"to": 7}),  # 9: turn four out of view
        ("context/rewind", {"to": 5}),  # 10: turn three and the rewind of four out of view
        ("context/rewind", {"to": "bad"}),  # 11: not a rewind this version understands: ignored
    )
    assert rewound_ranges(events) == [(2, 4), (7, 9), (5, 10)]
    assert [e.seq for e in in_view(events)] == [0, 1, 4, 10, 11]
    assert [(t.number, t.prompt) for t in turns(events)] == [(1, "one")]


def test_a_log_without_rewinds_is_returned_as_it_is() -> None:
    events = log(start(), said("one"))
    assert in_view(events) is events


def test_turns_number_the_turns_in_view_and_keep_each_files_first_state() -> None:
    events = log(
        start(),
        said("  edit   a and b please now, and then some more words here "),  # 0, 1
        ("checkpoint/file", {"turn": 0, "path": "/a", "existed": True, "digest": "d1", "mode": 0o644}),  # 2
        ("checkpoint/file", {"turn": 0, "path": "/a", "existed": True, "digest": "d2", "mode": 0o644}),  # 3
        start("compaction"),  # 4: not a user's turn
        start(),
        said("delete c"),  # 5, 6
        ("checkpoint/file", {"turn": 5, "path": "/c", "existed": False, "digest": None, "mode": None}),  # 7
    )
    listed = turns(events)
    assert [(t.number, t.seq) for t in listed] == [(1, 0), (2, 5)]
    assert listed[0].prompt == "edit a and b please now, and then some more words here"
    assert listed[0].files == {"/a": FileState(True, "d1", 0o644)}
    assert listed[1].files == {"/c": FileState(False)}
