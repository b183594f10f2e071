"""Sub-agent sessions on the wire, for a client that advertised ``clientCapabilities.subagents`` (stable v1 since
2026-11-20; RFC 0033). A client without it keeps the progress on the parent's ``task`` card and the child's tool
calls as cards tagged ``_meta.dsh.parentToolCallId`` (the projection's fallback).

What such a client gets, live and on ``session/load`` alike:

* ``subagent/start`` in the parent's log: the child announced on the parent (``subagent_update``: the child's
  ``sessionId``, title ``<type>: <description>``, description, ``capabilities.cancel``, state ``running``,
  ``_meta.dsh`` agent type, parent call, model) before anything of the child goes out; the parent's ``task`` card
  linked to it (``tool_call_update`` with ``session`` content); the prompt as a message between the sessions
  (``session_message`` + ``session_message_chunk``: the parent's outgoing view, the child's incoming view).
* The child's own log as ordinary updates of the child's session (messages, thoughts, plans, tool calls with
  their names), the prompt excepted (it is the message above, not a user message).
* ``subagent/end``: the child's report as a message to the parent (both views), then ``subagent_update`` with
  state ``idle`` and the stop reason (none for a failed child: ``_meta.dsh.outcome`` says ``failed``).
* Live only: ``requires_action`` while a child's permission request waits on the child's session, ``running``
  once it is answered (a replay has no pending request: it ends idle like the live child did).

Guarantees: nothing names a child before its announcement; the parent's other frames are exactly as without the
capability except that the child's cards and progress are not repeated on the parent (they are the child's);
a request naming a child answers -32602 (a child is driven by its parent, never by the client), a
``session/cancel`` of a running child cancels that child only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dsh._log import get_logger
from dsh.frontends.acp._projection import Presenter, encode_chunk_frame, encode_update, project, update_frame_prefix
from dsh.frontends.acp._rpc import INVALID_PARAMS, RpcError
from dsh.services.sessions import ChunkEvent, SessionEvent

if TYPE_CHECKING:
    from dsh.frontends.acp._features import ClientFeatures
    from dsh.services.sessions import Session

__all__ = ["SUBAGENT_KINDS", "ChildSessions", "child_updates"]

log = get_logger("dsh.acp")

START, END = "subagent/start", "subagent/end"
SUBAGENT_KINDS = frozenset({START, END})
_SKIPPED = frozenset({"user/message"})
"""Child events not shown on the child's session: its prompt is the parent's message (``session_message``)."""


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _message(
    sender: str, recipient: str, own_id: str, other_id: str, outgoing: bool, text: str
) -> list[dict[str, Any]]:
    """One view of a message between sessions: the upsert naming both ends, then its text as one chunk."""
    upsert = {
        "sessionUpdate": "session_message",
        "messageId": own_id,
        "senderSessionId": sender,
        "recipientSessionId": recipient,
        ("recipientMessageId" if outgoing else "senderMessageId"): other_id,
    }
    return [upsert, {"sessionUpdate": "session_message_chunk", "messageId": own_id, "content": _text(text)}]


def child_updates(event: SessionEvent, parent: str, names: dict[str, str] | None) -> list[tuple[str, dict[str, Any]]]:
    """The ``(session id, update)`` pairs of a ``subagent/start`` or ``subagent/end`` in *parent*'s log."""
    data = event.data
    child, call = str(data.get("session_id", "")), str(data.get("parent_call", ""))
    to_child, from_parent = f"to:{child}", "from:parent"
    if event.type == START:
        kind, description = str(data.get("agent_type", "")), str(data.get("description", ""))
        announce = {
            "sessionUpdate": "subagent_update",
            "sessionId": child,
            "title": f"{kind}: {description}",
            "description": description,
            "capabilities": {"cancel": {}},
            "state": {"state": "running"},
            "_meta": {"dsh": {"agentType": kind, "parentToolCallId": call, "model": data.get("model")}},
        }
        link: dict[str, Any] = {
            "sessionUpdate": "tool_call_update",
            "toolCallId": call,
            "status": "in_progress",
            "content": [{"type": "session", "sessionId": child}],
        }
        if names is not None and call in names:
            link["name"] = names[call]
        prompt = str(data.get("prompt", ""))
        pairs = [(parent, announce), (parent, link)]
        pairs += [(parent, u) for u in _message(parent, child, to_child, from_parent, True, prompt)]
        pairs += [(child, u) for u in _message(parent, child, from_parent, to_child, False, prompt)]
        return pairs
    pairs = []
    report = data.get("report")
    if isinstance(report, str):
        from_child, to_parent = f"from:{child}", "to:parent"
        pairs += [(child, u) for u in _message(child, parent, to_parent, from_child, True, report)]
        pairs += [(parent, u) for u in _message(child, parent, from_child, to_parent, False, report)]
    state: dict[str, Any] = {"state": "idle"}
    if isinstance(data.get("stop_reason"), str):
        state["stopReason"] = data["stop_reason"]
    state["_meta"] = {"dsh": {"outcome": data.get("state")}}
    pairs.append((parent, {"sessionUpdate": "subagent_update", "sessionId": child, "state": state}))
    return pairs


@dataclass(eq=False)
class _Child:
    id: str
    parent: str
    call: str
    running: bool = True
    prefix: bytes = b""
    names: dict[str, str] | None = None
    present: Presenter | None = None
    calls: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.prefix = update_frame_prefix(self.id)


class ChildSessions:
    """The children this connection's client sees as sessions of their own (empty without the capability)."""

    def __init__(
        self,
        features: Callable[[], ClientFeatures],
        send: Callable[[bytes], None],
        cancel_agent: Callable[[str], bool],
        presenter: Callable[[str, str], Presenter],
    ) -> None:
        self._features = features
        self._send = send
        self._cancel_agent = cancel_agent
        self._presenter = presenter
        self._children: dict[str, _Child] = {}

    def _frame(self, session_id: str, update: dict[str, Any]) -> bytes:
        child = self._children.get(session_id)
        prefix = child.prefix if child is not None else update_frame_prefix(session_id)
        return prefix + encode_update(update) + b"}}"

    def _register(self, event: SessionEvent, parent: str, cwd: str, running: bool) -> None:
        data = event.data
        child_id = str(data.get("session_id", ""))
        if event.type == START:
            names: dict[str, str] | None = {} if self._features().tool_names else None
            present = self._presenter(child_id, cwd)  # the child's tools, its parent's directory
            call = str(data.get("parent_call", ""))
            self._children[child_id] = _Child(child_id, parent, call, running, names=names, present=present)
        elif child_id in self._children:
            self._children[child_id].running = False

    # -- live ------------------------------------------------------------------------------------------

    def on_parent(self, parent: str, cwd: str, event: SessionEvent, names: dict[str, str] | None) -> None:
        """A ``subagent/start`` or ``subagent/end`` of a live parent (in *cwd*): announce, link, message, close."""
        self._register(event, parent, cwd, running=True)
        for session_id, update in child_updates(event, parent, names):
            self._send(self._frame(session_id, update))

    def on_child(self, session: Session, event: SessionEvent) -> None:
        """An event of a child this client was told about: an ordinary update of the child's session."""
        child = self._children.get(session.id)
        if child is None or not child.running:
            return
        if type(event) is ChunkEvent:
            self._send(encode_chunk_frame(child.prefix, event))
            return
        if event.type == "tool/call":
            child.calls.add(str(event.data.get("call_id")))
        elif event.type == "tool/result":
            child.calls.discard(str(event.data.get("call_id")))
        if event.type in _SKIPPED:
            return
        for update in project(event, present=child.present, features=self._features(), names=child.names):
            self._send(child.prefix + encode_update(update) + b"}}")

    def send(self, session_id: str, updates: list[dict[str, Any]]) -> None:
        """Updates of a running child this client sees (a notice about it); nothing for any other id."""
        child = self._children.get(session_id)
        if child is not None and child.running:
            for update in updates:
                self._send(child.prefix + encode_update(update) + b"}}")

    def child_of_call(self, parent: str, call_id: str) -> str | None:
        """The running child of *parent* whose open tool call *call_id* is (its permission request goes there)."""
        for child in self._children.values():
            if child.parent == parent and child.running and call_id in child.calls:
                return child.id
        return None

    def state(self, child_id: str, state: str) -> None:
        """A live work-state change of a running child (``requires_action`` / ``running``), on its parent."""
        child = self._children.get(child_id)
        if child is not None and child.running:
            update = {"sessionUpdate": "subagent_update", "sessionId": child_id, "state": {"state": state}}
            self._send(self._frame(child.parent, update))

    # -- requests naming a child -------------------------------------------------------------------------

    def refuse(self, session_id: str) -> None:
        """-32602 for a request naming a child this client knows (it is driven through its parent)."""
        child = self._children.get(session_id)
        if child is not None:
            how = "running" if child.running else "not running"
            raise RpcError(
                INVALID_PARAMS,
                f"session {session_id} is a sub-agent of session {child.parent} ({how}): it takes no requests; "
                f"prompt or cancel its parent instead",
                {"sessionId": session_id, "parentSessionId": child.parent, "running": child.running},
            )

    def cancel(self, session_id: str) -> bool:
        """``session/cancel`` naming a child: cancel that child's work if it runs (True when it named a child)."""
        child = self._children.get(session_id)
        if child is None:
            return False
        if child.running:
            self._cancel_agent(session_id)
        return True

    def forget(self, parent: str) -> None:
        """The parent closed: its children are no longer this connection's."""
        for child_id in [c.id for c in self._children.values() if c.parent == parent]:
            del self._children[child_id]

    # -- load --------------------------------------------------------------------------------------------

    async def load_children(self, shown: Iterable[SessionEvent], persistence: Any) -> dict[str, list[SessionEvent]]:
        """The stored logs of the children a parent's replay announces (a child that cannot be read is announced
        and closed without its own updates, with a log line)."""
        logs: dict[str, list[SessionEvent]] = {}
        if persistence is None or not self._features().subagents:
            return logs
        for event in shown:
            if type(event) is ChunkEvent or event.type != START:
                continue
            child_id = str(event.data.get("session_id", ""))
            try:
                loaded = await persistence.load(child_id)
            except Exception as exc:
                log.warning("sub-agent session not replayed", session_id=child_id, error=str(exc)[:300])
                continue
            persistence.release(child_id)
            logs[child_id] = loaded.events
        return logs

    def replay_frames(
        self,
        parent: str,
        cwd: str,
        event: SessionEvent,
        logs: dict[str, list[SessionEvent]],
        names: dict[str, str] | None,
    ) -> list[bytes]:
        """The frames a replay sends for a ``subagent/start`` (the announcement, the link and the prompt, then the
        child's whole log) or a ``subagent/end`` of *parent*'s log; the child is remembered as not running."""
        self._register(event, parent, cwd, running=False)
        frames = [self._frame(session_id, update) for session_id, update in child_updates(event, parent, names)]
        if event.type != START:
            return frames
        child = self._children[str(event.data.get("session_id", ""))]
        features = self._features()
        for child_event in logs.get(child.id, ()):
            if type(child_event) is ChunkEvent:
                frames.append(encode_chunk_frame(child.prefix, child_event))
            elif child_event.type not in _SKIPPED:
                updates = project(child_event, replay=True, present=child.present, features=features, names=child.names)
                frames.extend(child.prefix + encode_update(update) + b"}}" for update in updates)
        return frames
