"""Comparing what a replayed daemon sends with what the recorded one sent: equal modulo ids, times, paths.

What "equal" ignores, and nothing else:

* the JSON-RPC ``id`` of a frame (the daemon's own request ids are paired up in order of appearance);
* the value of every key ending in ``Id`` or ``_id`` (``sessionId``, ``toolCallId``, ``message_id``, …):
  a value the replay made is paired with the recorded value at its first appearance, and must then be used
  consistently (a second session id where the recording had the first one is a difference);
* an ISO-8601 time against another ISO-8601 time;
* inside any text, the paired ids and the replay's own paths (its data directory, a ``--cwd``) written as the
  recording's.
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

__all__ = ["Pairing", "describe", "diff", "equal"]

_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$")
MIN_SUBSTITUTED = 8
"""Paired ids shorter than this are not replaced inside texts (``1`` would replace every digit)."""


class Pairing:
    """What the replay calls by another name: ids (replay → recorded) and paths (replay → recorded)."""

    def __init__(self, paths: dict[str, str] | None = None) -> None:
        self.ids: dict[str, str] = {}
        self.paths: dict[str, str] = dict(paths or {})
        self.requests: dict[Any, Any] = {}
        """Recorded daemon request id → the replayed daemon's id for the same request."""

    def copy(self) -> Pairing:
        other = Pairing(self.paths)
        other.ids = dict(self.ids)
        other.requests = dict(self.requests)
        return other

    def substitutions(self) -> list[tuple[str, str]]:
        """(replay, recorded) pairs applied inside texts, longest first."""
        pairs = [(a, b) for a, b in self.ids.items() if len(a) >= MIN_SUBSTITUTED and a != b]
        pairs += [(a, b) for a, b in self.paths.items() if a != b]
        return sorted(pairs, key=lambda pair: -len(pair[0]))

    def as_recorded(self, text: str) -> str:
        return _substitute(text, dict(self.substitutions()))

    def as_replayed(self, text: str) -> str:
        return _substitute(text, {theirs: ours for ours, theirs in self.substitutions()})

    def to_recorded(self, value: Any) -> Any:
        """*value* (a replayed frame) in the recording's names."""
        return _map(value, self.as_recorded, self.ids)

    def to_replayed(self, value: Any) -> Any:
        """*value* (a recorded client frame) in the replay's names."""
        back = {theirs: ours for ours, theirs in self.ids.items()}
        return _map(value, self.as_replayed, back)


def _substitute(text: str, pairs: dict[str, str]) -> str:
    """*text* with every key of *pairs* replaced by its value in one pass, longest first: a replacement is never
    replaced again (the replay's data directory may lie inside the directory that stands for the recorded cwd)."""
    if not pairs or not any(key in text for key in pairs):
        return text
    pattern = re.compile("|".join(re.escape(key) for key in sorted(pairs, key=len, reverse=True)))
    return pattern.sub(lambda match: pairs[match.group(0)], text)


def _is_id(key: str) -> bool:
    return key.endswith(("Id", "_id"))


def _map(value: Any, text: Any, ids: dict[str, str], key: str = "") -> Any:
    if isinstance(value, str):
        if _is_id(key) and value in ids:
            return ids[value]
        return text(value)
    if isinstance(value, dict):
        return {k: _map(v, text, ids, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_map(item, text, ids, key) for item in value]
    return value


def equal(expected: Any, got: Any, pairing: Pairing) -> bool:
    """Whether the replayed frame *got* is the recorded *expected* (see the module docstring); pairs of new ids
    are added to *pairing* (give it a copy when the answer may be no)."""
    if isinstance(expected, dict) and isinstance(got, dict):
        if expected.keys() != got.keys():
            return False
        for key, value in expected.items():
            if key == "id" and ("method" in expected or "result" in expected or "error" in expected):
                if "method" in expected:  # the daemon's own request: pair its id for the client's answer
                    pairing.requests.setdefault(value, got[key])
                continue
            if not _equal(value, got[key], pairing, key):
                return False
        return True
    return _equal(expected, got, pairing, "")


def _equal(expected: Any, got: Any, pairing: Pairing, key: str) -> bool:
    if isinstance(expected, dict):
        if not isinstance(got, dict) or expected.keys() != got.keys():
            return False
        return all(_equal(value, got[k], pairing, k) for k, value in expected.items())
    if isinstance(expected, list):
        if not isinstance(got, list) or len(expected) != len(got):
            return False
        return all(_equal(a, b, pairing, key) for a, b in zip(expected, got, strict=True))
    if isinstance(expected, str) and isinstance(got, str):
        if _is_id(key):
            known = pairing.ids.get(got)
            if known is not None:
                return known == expected
            if expected in pairing.ids.values():
                return False
            pairing.ids[got] = expected
            return True
        if got == expected or pairing.as_recorded(got) == expected:
            return True
        return bool(_TIME.match(expected) and _TIME.match(got))
    return type(expected) is type(got) and expected == got


def describe(frame: Any) -> str:
    """A short name for a frame: its method and what it is about (``session/update tool_call_update call_1``)."""
    if not isinstance(frame, dict):
        return "a frame that is not a JSON object"
    method = frame.get("method")
    if isinstance(method, str):
        params: dict[str, Any] = frame["params"] if isinstance(frame.get("params"), dict) else {}
        update: dict[str, Any] = params["update"] if isinstance(params.get("update"), dict) else {}
        parts = [method]
        if "sessionUpdate" in update:
            parts.append(str(update["sessionUpdate"]))
        call = update.get("toolCallId") or (params.get("toolCall") or {}).get("toolCallId")
        if call:
            parts.append(f"({call})")
        return " ".join(parts) + (" request" if "id" in frame else "")
    if "error" in frame:
        return f"error answer to request {frame.get('id')!r}"
    return f"answer to request {frame.get('id')!r}"


def diff(expected: Any, got: Any, pairing: Pairing) -> str:
    """A unified diff of the two frames, pretty-printed, with the replay's names written as the recording's."""
    ours = json.dumps(pairing.to_recorded(got), indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    theirs = json.dumps(expected, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    return "\n".join(difflib.unified_diff(theirs, ours, "recorded", "replayed", lineterm="", n=3))
