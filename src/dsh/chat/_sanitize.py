"""What the agent sends, made safe to show: no byte of it can drive the terminal (issue 34, RFC 0030).

Everything the chat shows that came from the agent (text, thoughts, titles, diffs, command output, plans,
option labels, names, errors) passes through here before it reaches a renderer; only the chat's own renderer
(rich, prompt_toolkit) emits escape sequences.

Guarantees of :func:`sanitize`:

* Newline and tab are kept (``one_line``: a newline is shown as ``↵``); a CR right before a newline is dropped
  (CRLF text reads as it should).
* Every other C0 control character, DEL, and ESC is shown in caret notation (``^[``, ``^M``, ``^?``): it stays
  visible, so a hidden command cannot pass for another, and it can no longer move the cursor, retitle the
  window, reach the clipboard or clear the screen.
* C1 controls (U+0080 to U+009F, which a UTF-8 terminal may take as CSI, OSC, …) are shown as ``\\x9b``.
* Bidirectional controls (U+061C, U+200E, U+200F, U+202A to U+202E, U+2066 to U+2069) and the line and
  paragraph separators (U+2028, U+2029) are shown as ``<U+202E>``: text can no longer be reordered on screen.
* Everything else is unchanged; the result never holds a character below U+0020 other than newline and tab.

:func:`clean` applies it to every string inside JSON-like data (dict keys are left alone: they are the
protocol's, not shown).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["clean", "sanitize"]

_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029"
_UNSAFE = re.compile(f"[\x00-\x08\x0a-\x1f\x7f-\x9f{_BIDI}]")


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if char == "\n":
        return "\n"
    if code < 0x20:
        return "^" + chr(code + 0x40)
    if code == 0x7F:
        return "^?"
    if code <= 0x9F:
        return f"\\x{code:02x}"
    return f"<U+{code:04X}>"


def _visible_line(match: re.Match[str]) -> str:
    return "↵" if match.group() == "\n" else _visible(match)


def sanitize(text: str, *, one_line: bool = False) -> str:
    """*text* with every control, C1 and bidi character made visible (see the module docstring)."""
    if not _UNSAFE.search(text):
        return text  # the common case: nothing to do, no copy
    text = text.replace("\r\n", "\n")
    return _UNSAFE.sub(_visible_line if one_line else _visible, text)


def clean(value: Any) -> Any:
    """*value* (decoded JSON) with every string in it sanitised; keys kept."""
    if isinstance(value, str):
        return sanitize(value)
    if isinstance(value, dict):
        return {key: clean(item) for key, item in value.items()}
    if isinstance(value, list):
        return [clean(item) for item in value]
    return value
