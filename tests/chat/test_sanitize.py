"""The sanitiser every agent string passes before it is drawn (issue 34 item 1)."""

from __future__ import annotations

from dsh.chat._sanitize import clean, sanitize


def test_every_control_class_is_made_visible_and_newline_and_tab_are_kept() -> None:
    assert sanitize("a\tb\nc") == "a\tb\nc"
    assert sanitize("\x1b]0;t\x07") == "^[]0;t^G"
    assert sanitize("x\r\ny\rz") == "x\ny^Mz"
    assert sanitize("\x00\x7f") == "^@^?"
    assert sanitize("\x9b31m\x85") == "\\x9b31m\\x85"
    assert sanitize("\u202eevil\u2066\u200f") == "<U+202E>evil<U+2066><U+200F>"
    assert sanitize("two\nlines", one_line=True) == "two↵lines"


def test_the_result_never_holds_a_control_character_and_sanitising_twice_changes_nothing() -> None:
    every = "".join(chr(c) for c in range(0x00, 0xA0)) + "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2069"
    once = sanitize(every)
    assert all(ch in "\n\t" or (0x20 <= ord(ch) < 0x7F) or ord(ch) > 0x9F for ch in once)
    assert not any(ch in once for ch in "\u061c\u200e\u200f\u202a\u202e\u2066\u2069")
    assert sanitize(once) == once


def test_clean_sanitises_every_string_of_json_data_and_keeps_the_keys() -> None:
    data = {"title": "\x1b[2J", "content": [{"text": "\x07"}], "n": 3, "\x1bkey": None}
    assert clean(data) == {"title": "^[[2J", "content": [{"text": "^G"}], "n": 3, "\x1bkey": None}
