"""A session: an append-only log of events, the single source of truth of a conversation.

Guarantees:

* ``events[i].seq == i`` always; a seeded session checks it on construction.
* ``data`` is lossless JSON and is copied on append, so the log never aliases caller objects; events are
  frozen and must be treated as immutable.
* :meth:`Session.append` pushes first and then notifies the store's hook synchronously (which emits
  ``session/event``); an exception from a listener propagates to the appender, *after* the event is in the log
  and every other listener has seen it.
* :meth:`Session.derive_messages` is a pure function of the log (reference §6.2); it is computed incrementally
  and returns a fresh deep copy each time.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from dsh.services.llm._types import ContentBlock, Message
from dsh.services.sessions._json import copy_json

__all__ = ["Session", "SessionEvent", "SessionHeader", "title_from_content"]

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


@dataclass(frozen=True, slots=True)
class SessionHeader:
    """Kept outside the log: ``{version, id, created_at, cwd?, parent_session?}``."""

    id: str
    created_at: float
    cwd: str | None = None
    parent_session: str | None = None
    version: int = SESSION_FORMAT_VERSION

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"version": self.version, "id": self.id, "created_at": self.created_at}
        if self.cwd is not None:
            out["cwd"] = self.cwd
        if self.parent_session is not None:
            out["parent_session"] = self.parent_session
        return out


AppendHook = Callable[["Session", SessionEvent], None]


class Session:
    """An append-only event log with a header. Create sessions through ``ctx.sessions``."""

    __slots__ = ("_derived", "_derived_upto", "_events", "_hook", "header")

    def __init__(self, header: SessionHeader, seed: Sequence[SessionEvent] = (), *, seed_owned: bool = False) -> None:
        """*seed_owned*: the seed's data were just parsed from JSON by a strict parser and nobody else holds
        them (a persistence backend's load), so they are adopted without the validating copy."""
        for index, event in enumerate(seed):
            if event.seq != index:
                raise ValueError(f"seeded event {index} has seq {event.seq}; seqs must be contiguous from 0")
        if seed_owned:
            events = list(seed)
        else:
            events = [SessionEvent(e.type, e.seq, e.time, copy_json(e.data, f"{e.type}#{e.seq}")) for e in seed]
        self.header = header
        self._events = events
        self._hook: AppendHook | None = None
        self._derived: list[Message] = []
        self._derived_upto = 0

    @property
    def id(self) -> str:
        return self.header.id

    @property
    def events(self) -> Sequence[SessionEvent]:
        """A read-only view of the log (a tuple snapshot)."""
        return tuple(self._events)

    @property
    def seq(self) -> int:
        """The seq the next event will get (= the number of events)."""
        return len(self._events)

    def last(self, *types: str) -> SessionEvent | None:
        """The most recent event whose type is one of *types*."""
        for event in reversed(self._events):
            if event.type in types:
                return event
        return None

    def append(self, type: str, data: dict[str, Any]) -> SessionEvent:
        """Validate and copy *data*, push the event, then notify (``session/event``) synchronously."""
        event = SessionEvent(type, len(self._events), time.time(), copy_json(data, type))
        self._events.append(event)
        hook = self._hook
        if hook is not None:
            hook(self, event)
        return event

    def derive_messages(self) -> list[Message]:
        """The conversation as model messages (reference §6.2), deep-copied."""
        events = self._events
        for index in range(self._derived_upto, len(events)):
            event = events[index]
            if event.type == "context/reset":  # /clear: the model sees nothing from before it
                self._derived.clear()
                continue
            message = _derive_one(event)
            if message is not None:
                self._derived.append(message)
        self._derived_upto = len(events)
        return cast(list[Message], copy_json(self._derived))


def _wrap(tag: str, source: Any, content: list[ContentBlock]) -> Message:
    kind = source.get("kind", "user") if isinstance(source, dict) else "user"
    opening: ContentBlock = {"type": "text", "text": f"<{tag} source={json.dumps(kind)}>"}
    closing: ContentBlock = {"type": "text", "text": f"</{tag}>"}
    return {"role": "user", "content": [opening, *content, closing]}


def _derive_one(event: SessionEvent) -> Message | None:
    data = event.data
    match event.type:
        case "user/message":
            return {"role": "user", "content": list(data["content"])}
        case "assistant/message":
            return {"role": "assistant", "content": list(data["content"])}
        case "tool/result":
            block: ContentBlock = {
                "type": "tool-result",
                "tool_call_id": data["call_id"],
                "content": list(data["content"]),
                "is_error": bool(data.get("is_error", False)),
            }
            return {"role": "user", "content": [block]}
        case "context/message":
            return _wrap("context", data.get("source"), list(data["content"]))
        case "steering/message":
            return _wrap("steering", data.get("source"), list(data["content"]))
    return None
