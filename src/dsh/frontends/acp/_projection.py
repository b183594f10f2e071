"""Session events → ACP ``session/update`` payloads: one pure function, shared by live streaming and replay.

Purity is the point: a replayed log produces exactly the updates the live session produced (plus the user's
own messages, which a live client already shows, and a mark on a turn that was cancelled or interrupted, which a
live client learnt from the prompt's answer), so ``session/load`` cannot drift from what the user saw.

Mapping:

| session event                         | update                                                       |
|---------------------------------------|--------------------------------------------------------------|
| ``assistant/chunk`` text-delta        | ``agent_message_chunk`` (messageId per turn and step)        |
| ``assistant/chunk`` reasoning-delta   | ``agent_thought_chunk`` (its own messageId)                  |
| other chunks (usage, finish, …)       | none (``block-end`` would duplicate the streamed text)       |
| ``tool/call``                         | ``tool_call`` (pending, title, kind, rawInput)               |
| ``tool/running`` (permission gate)    | ``tool_call_update`` (in_progress)                           |
| ``tool/result``                       | ``tool_call_update`` (completed or failed, text content; the |
|                                       | title and kind of ``display.card`` when the tool gives one;  |
|                                       | an editor terminal live only: replay embeds the output text; |
|                                       | the lines of its hook runs last, ``display.hooks``; an       |
|                                       | edit's new diagnostics as ``_meta.dsh.diagnostics``)         |
| ``tool/progress`` (a running tool,    | ``tool_call_update`` (in_progress, its text as the card's    |
| a sub-agent)                          | content so far)                                              |
| ``subagent/event`` (a sub-agent's     | what the inner event projects to, its ``toolCallId`` made    |
| ``tool/call``/``running``/``result``) | ``<child session>/<call id>``, ``_meta.dsh.parentToolCallId`` |
| ``user/message`` (replay only)        | ``user_message_chunk`` per text block                        |
| ``steering/message`` (replay only)    | the same, with ``_meta.dsh.steer`` (RFC 0036)                |
| ``context/compaction``                | a completed ``think`` tool card "Compacted conversation" with |
|                                       | the summary (or ``compaction_update`` + summary chunk when    |
|                                       | the client advertises ``session.compaction``), then           |
|                                       | ``usage_update`` with the new figure when the window is known |
| ``plan/update``                       | ``plan`` (the complete list of entries); with ``plan``:       |
|                                       | ``plan_update`` (planId ``checklist``) or ``plan_removed``    |
| ``plan/document`` (exit_plan_mode)    | with ``plan``: ``plan_update`` (Markdown, planId ``plan-mode``) |
|                                       | else none (the permission request shows it, as before)        |
| ``command/output``                    | ``agent_message_chunk`` (replay: the ``/command`` line first) |
| ``spend/stop`` (a budget stopped the  | ``agent_message_chunk`` with its message (which budget, how   |
| turn, :mod:`dsh.spend`)               | to raise it)                                                  |
| ``turn/end`` cancelled or interrupted | ``session_info_update`` with ``_meta.dsh.turnEnd``           |
| (replay only)                         | (``cancelled``, ``interrupted``): a client can mark the turn |
| anything else                         | none                                                         |

Every ``tool_call`` and ``tool_call_update`` also carries the tool's catalogue ``name`` when the caller passes
*names* (a client that knows schema 1.22, :class:`~._features.ClientFeatures`): the projection remembers each
call's name from its ``tool/call`` in that dict and forgets it at its ``tool/result``, so a replay that starts with
an empty dict names exactly what the live session named.
"""

from __future__ import annotations

from collections.abc import Callable
from json.encoder import encode_basestring_ascii as _encode_text
from typing import TYPE_CHECKING, Any

import orjson

from dsh._jsonlimits import exceeds_depth, text_may_exceed
from dsh.policy import escape_control
from dsh.services.sessions import ChunkEvent, SessionEvent, dumps_json, parse_json

if TYPE_CHECKING:
    from dsh.frontends.acp._features import ClientFeatures
    from dsh.services.tools import ToolCard

__all__ = [
    "CHECKLIST_PLAN",
    "Presenter",
    "card_fields",
    "encode_chunk_frame",
    "encode_update",
    "failed_update",
    "project",
    "tool_kind",
    "update_frame_prefix",
]

_KINDS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("read", "cat", "view", "open"), "read"),
    (("write", "edit", "patch", "replace", "apply"), "edit"),
    (("delete", "remove", "rm"), "delete"),
    (("move", "rename", "mv"), "move"),
    (("grep", "search", "find", "glob", "list", "ls"), "search"),
    (("run", "bash", "shell", "exec", "command", "terminal"), "execute"),
    (("fetch", "http", "download", "web"), "fetch"),
    (("think", "plan"), "think"),
)


_ACP_KINDS = frozenset(
    {"read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"}
)


def tool_kind(name: str) -> str:
    """An ACP ``ToolKind`` guessed from a tool's name (``other`` when nothing fits)."""
    lowered = name.lower()
    for prefixes, kind in _KINDS:
        if lowered.startswith(prefixes):
            return kind
    return "other"


def _raw_input(arguments: str) -> Any:
    if not arguments.strip():
        return {}
    try:
        parsed = parse_json(arguments)
    except (ValueError, RecursionError):  # not (lossless) JSON: shown as the model wrote it
        return arguments
    if text_may_exceed(arguments) and exceeds_depth(parsed):
        return arguments  # too deep to pass on as JSON (the call itself was refused)
    return parsed


def _text_content(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A tool result's text and images as tool call content (an image as the ACP image block it came from:
    a ``data:`` URL's base64 and MIME type, so the card shows what the model saw)."""
    content: list[dict[str, Any]] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            content.append({"type": "content", "content": {"type": "text", "text": block["text"]}})
        elif kind == "image":
            url = block.get("url")
            if isinstance(url, str) and url.startswith("data:") and ";base64," in url:
                mime, _, data = url[5:].partition(";base64,")
                content.append({"type": "content", "content": {"type": "image", "data": data, "mimeType": mime}})
    return content


def failed_update(call_id: str, message: str, names: dict[str, str] | None = None) -> dict[str, Any]:
    """The final update for a tool call that will never get a result (the turn was cancelled)."""
    update: dict[str, Any] = {
        "sessionUpdate": "tool_call_update",
        "toolCallId": call_id,
        "status": "failed",
        "content": [{"type": "content", "content": {"type": "text", "text": message}}],
    }
    if names is not None and call_id in names:
        update["name"] = names.pop(call_id)
    return update


CHECKLIST_PLAN = "checklist"
"""The ``planId`` of a session's ``update_plan`` checklist (one per session: plan ids are per session)."""


def _plan(data: dict[str, Any], features: ClientFeatures | None) -> list[dict[str, Any]]:
    entries = data.get("entries", [])
    if features is None or not features.plan:
        return [{"sessionUpdate": "plan", "entries": entries}]
    if not entries:  # the model dropped its plan
        return [{"sessionUpdate": "plan_removed", "planId": CHECKLIST_PLAN}]
    return [{"sessionUpdate": "plan_update", "plan": {"type": "items", "planId": CHECKLIST_PLAN, "entries": entries}}]


def _plan_document(data: dict[str, Any], features: ClientFeatures | None) -> list[dict[str, Any]]:
    if features is None or not features.plan or not isinstance(data.get("content"), str):
        return []
    plan: dict[str, Any] = {"type": "markdown", "planId": str(data.get("plan_id", "plan")), "content": data["content"]}
    if isinstance(data.get("path"), str):
        plan["_meta"] = {"dsh": {"path": data["path"]}}
    return [{"sessionUpdate": "plan_update", "plan": plan}]


def _named(update: dict[str, Any], names: dict[str, str] | None, *, forget: bool = False) -> dict[str, Any]:
    """*update* with its call's catalogue name, when names are wanted and the call's ``tool/call`` was seen."""
    if names is not None:
        name = names.pop(update["toolCallId"], None) if forget else names.get(update["toolCallId"])
        if name is not None:
            update["name"] = name
    return update


Presenter = Callable[[str, Any], "ToolCard | None"]
"""How a tool call presents itself: ``present(tool name, parsed arguments)``; None when the tool does not say."""


def card_fields(card: ToolCard) -> dict[str, Any]:
    """The ACP ``ToolCall`` fields of a card: title, kind, locations and the diff it is about to make. The title
    has its control and invisible characters escaped (:func:`dsh.policy.escape_control`): an editor never shows
    a title that hides or rewrites part of what the call does."""
    fields: dict[str, Any] = {
        "title": escape_control(card.title, newlines=True),
        "kind": card.kind if card.kind in _ACP_KINDS else "other",
    }
    if card.locations:
        fields["locations"] = [
            {"path": path} if line is None else {"path": path, "line": line} for path, line in card.locations
        ]
    if card.diff is not None:
        path, old, new = card.diff
        fields["content"] = [{"type": "diff", "path": path, "oldText": old, "newText": new}]
    return fields


def _display_content(display: Any, replay: bool) -> list[dict[str, Any]]:
    """Tool call content from a result's ``display``: a diff, an editor terminal.

    A terminal only live: on replay its id names a terminal an earlier process created and released, which the
    client no longer knows (it would show an empty or broken card); the command's output is in the result's text
    content, which follows, so the replayed card embeds it instead."""
    if not isinstance(display, dict):
        return []
    content: list[dict[str, Any]] = []
    terminal = display.get("terminal_id")
    if isinstance(terminal, str) and not replay:
        content.append({"type": "terminal", "terminalId": terminal})
    diff = display.get("diff")
    if isinstance(diff, dict) and isinstance(diff.get("path"), str) and isinstance(diff.get("new_text"), str):
        old = diff.get("old_text")
        content.append(
            {
                "type": "diff",
                "path": diff["path"],
                "oldText": old if isinstance(old, str) else None,
                "newText": diff["new_text"],
            }
        )
    return content


def _hook_lines(display: Any) -> list[dict[str, Any]]:
    """The short lines of a call's hook runs (``display.hooks``, :mod:`dsh.hooks`): the card's last content."""
    hooks = display.get("hooks") if isinstance(display, dict) else None
    if not isinstance(hooks, list):
        return []
    return [{"type": "content", "content": {"type": "text", "text": str(line)}} for line in hooks]


def _compaction(event: SessionEvent, native: bool) -> list[dict[str, Any]]:
    data = event.data
    summary = str(data.get("summary") or "")
    call_id = f"compaction-{event.seq}"
    updates: list[dict[str, Any]]
    if native:
        updates = [
            {"sessionUpdate": "compaction_update", "compactionId": call_id, "status": "completed"},
            {"sessionUpdate": "compaction_summary_chunk", "compactionId": call_id, "content": _text(summary)},
        ]
    else:
        raw = {key: data[key] for key in ("trigger", "tokens_before", "tokens_after", "upto") if key in data}
        updates = [
            {
                "sessionUpdate": "tool_call",
                "toolCallId": call_id,
                "title": "Compacted conversation",
                "kind": "think",
                "status": "completed",
                "content": [{"type": "content", "content": _text(summary)}],
                "rawInput": raw,
            }
        ]
    from dsh.context import usage_update  # a compaction is rare: not loaded with the projection

    usage = usage_update(data.get("tokens_after"), data.get("window"))
    if usage is not None:
        updates.append(usage)
    return updates


_TURN_ENDS = {"aborted": "cancelled", "interrupted": "interrupted"}
"""Turn ends a replay marks (``turn/end`` reason kinds), as the stop reason a client saw, or would have."""


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def project(
    event: SessionEvent,
    *,
    replay: bool = False,
    present: Presenter | None = None,
    compaction_updates: bool = False,
    features: ClientFeatures | None = None,
    names: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The ``session/update`` payloads (the ``update`` objects) for one session event.

    *present* lets tools show themselves (title, kind, locations, diff); it must be as deterministic as the
    rest, so live streaming and a replay give the same cards. *compaction_updates*: the client advertised
    ``session.compaction`` (it gets ``compaction_update`` instead of a tool card). *features*: what else the
    client advertised (plan operations); *names*: the calls' catalogue names (see the module's docstring)."""
    if type(event) is ChunkEvent:  # a loaded chunk: no data dicts to build (replays of big sessions)
        turn, step, chunk_kind, text = event.text_chunk
        if chunk_kind == "text-delta":
            return [_text_chunk("agent_message_chunk", text, f"m{turn}.{step}")]
        return [_text_chunk("agent_thought_chunk", text, f"t{turn}.{step}")]
    kind = event.type
    data = event.data
    if kind == "assistant/chunk":
        chunk = data["chunk"]
        chunk_type = chunk.get("type")
        if chunk_type == "text-delta":
            return [_text_chunk("agent_message_chunk", chunk["text"], f"m{data['turn']}.{data['step']}")]
        if chunk_type == "reasoning-delta":
            return [_text_chunk("agent_thought_chunk", chunk["text"], f"t{data['turn']}.{data['step']}")]
        return []
    if kind == "tool/call":
        name = data["name"]
        raw_input = _raw_input(data["arguments"])
        call: dict[str, Any] = {
            "sessionUpdate": "tool_call",
            "toolCallId": data["call_id"],
            "title": name,
            "kind": tool_kind(name),
            "status": "pending",  # in_progress once it runs (the permission gate says so), never before
            "rawInput": raw_input,
        }
        card = present(name, raw_input) if present is not None else None
        if card is not None:
            call.update(card_fields(card))
        if names is not None:
            names[data["call_id"]] = call["name"] = name
        return [call]
    if kind == "tool/running":  # the permission gate let the call run
        running = {"sessionUpdate": "tool_call_update", "toolCallId": data["call_id"], "status": "in_progress"}
        return [_named(running, names)]
    if kind == "tool/progress" and features is not None and features.subagents and _of_child(data):
        return []  # the card links the child's session (``session`` content), which shows the work itself
    if kind == "tool/progress":  # a running tool's report so far (a sub-agent's work): the card's content
        progress: dict[str, Any] = {
            "sessionUpdate": "tool_call_update",
            "toolCallId": data["call_id"],
            "status": "in_progress",
            "content": _text_content(data.get("content", [])),
        }
        if isinstance(data.get("meta"), dict):
            progress["_meta"] = data["meta"]
        return [_named(progress, names)]
    if kind == "subagent/event" and features is not None and features.subagents:
        return []  # the child's own session shows its cards
    if kind == "subagent/event":  # a sub-agent's tool call, shown as a card tagged with the parent's call
        return _subagent(data, replay, present, names)
    if kind == "tool/result":
        update: dict[str, Any] = {
            "sessionUpdate": "tool_call_update",
            "toolCallId": data["call_id"],
            "status": "failed" if data.get("is_error") else "completed",
        }
        display = data.get("display")
        card = display.get("card") if isinstance(display, dict) else None
        if isinstance(card, dict) and isinstance(card.get("title"), str):  # the tool names its card itself
            update["title"] = card["title"]
            update["kind"] = card.get("kind") if card.get("kind") in _ACP_KINDS else "other"
        content = _display_content(display, replay) + _text_content(data.get("content", [])) + _hook_lines(display)
        if content:
            update["content"] = content
        if isinstance(display, dict) and isinstance(display.get("line"), int):
            diff = display.get("diff")
            if isinstance(diff, dict) and isinstance(diff.get("path"), str):
                update["locations"] = [{"path": diff["path"], "line": display["line"]}]
        diagnostics = display.get("diagnostics") if isinstance(display, dict) else None
        if isinstance(diagnostics, dict):  # an edit's new diagnostics (dsh.lsp), for a client that draws them
            update["_meta"] = {"dsh": {"diagnostics": diagnostics}}
        return [_named(update, names, forget=True)]
    if kind == "context/compaction":
        return _compaction(event, compaction_updates or (features is not None and features.compaction))
    if kind == "plan/update":
        return _plan(data, features)
    if kind == "plan/document":
        return _plan_document(data, features)
    if kind == "turn/end" and replay:  # live, the prompt's stop reason says it
        reason = data.get("reason")
        ended = _TURN_ENDS.get(str(reason.get("kind"))) if isinstance(reason, dict) else None
        return [{"sessionUpdate": "session_info_update", "_meta": {"dsh": {"turnEnd": ended}}}] if ended else []
    if kind == "command/output":
        updates = [_text_chunk("agent_message_chunk", str(data.get("text", "")), f"c{event.seq}")]
        if replay:
            typed = f"/{data.get('name', '')} {data.get('args', '')}".rstrip()
            updates.insert(0, {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": typed}})
        return updates
    if kind == "spend/stop":
        return [_text_chunk("agent_message_chunk", f"\n\n{data.get('message', '')}\n", f"s{event.seq}")]
    if (kind == "user/message" or kind == "steering/message") and replay:
        source = data.get("source")
        source = source if isinstance(source, dict) else {}
        shown = source.get("shown")
        if isinstance(shown, list):  # the blocks as the client sent them (links, resources)
            blocks = [block for block in shown if isinstance(block, dict)]
        else:
            blocks = [{"type": "text", "text": b["text"]} for b in data.get("content", []) if b.get("type") == "text"]
        updates = []
        for block in blocks:
            chunk_update: dict[str, Any] = {"sessionUpdate": "user_message_chunk", "content": block}
            if isinstance(source.get("message_id"), str):
                chunk_update["messageId"] = source["message_id"]
            if kind == "steering/message":  # typed during the turn (``_dsh/session/steer``): the client may mark it
                chunk_update["_meta"] = {"dsh": {"steer": True}}
            updates.append(chunk_update)
        return updates
    return []


_SUBAGENT_KINDS = ("tool/call", "tool/running", "tool/result")


def _of_child(data: dict[str, Any]) -> bool:
    meta = data.get("meta")
    dsh = meta.get("dsh") if isinstance(meta, dict) else None
    return isinstance(dsh, dict) and "subagentSessionId" in dsh


def _subagent(
    data: dict[str, Any], replay: bool, present: Presenter | None, names: dict[str, str] | None
) -> list[dict[str, Any]]:
    inner = data.get("data")
    inner_type = data.get("type")
    if inner_type not in _SUBAGENT_KINDS or not isinstance(inner, dict) or "call_id" not in inner:
        return []
    scoped = {**inner, "call_id": f"{data.get('session_id', '')}/{inner['call_id']}"}
    if inner_type == "tool/call" and ("name" not in scoped or "arguments" not in scoped):
        return []
    updates = project(SessionEvent(str(inner_type), 0, 0.0, scoped), replay=replay, present=present, names=names)
    meta = {"dsh": {"parentToolCallId": data.get("parent_call"), "subagentSessionId": data.get("session_id")}}
    return [{**update, "_meta": meta} for update in updates]


class _TextChunk(dict[str, Any]):
    """A text-chunk update exactly as :func:`project` builds it: keys ``sessionUpdate``, ``content`` (``type``,
    ``text``) and ``messageId``, in that order. The type tells :func:`encode_update` it may take the fast path."""

    __slots__ = ()


def _text_chunk(kind: str, text: str, message_id: str) -> dict[str, Any]:
    return _TextChunk(sessionUpdate=kind, content={"type": "text", "text": text}, messageId=message_id)


def _json_text(text: str) -> bytes:
    try:
        return orjson.dumps(text)
    except TypeError:  # a lone surrogate: only the standard encoder's ASCII escapes spell it
        return _encode_text(text).encode()


_CHUNK_FRAMES = {
    "text-delta": (b'{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":', b'},"messageId":"m'),
    "reasoning-delta": (
        b'{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":',
        b'},"messageId":"t',
    ),
}


def encode_chunk_frame(prefix: bytes, event: ChunkEvent) -> bytes:
    """The whole ``session/update`` frame of a text chunk, byte for byte ``prefix + encode_update(update) +
    b"}}"`` for its projected update, without building the update: *prefix* (the frame up to ``"update":``,
    see :func:`update_frame_prefix`), the step's constant parts and the chunk's stored JSON text, in one step."""
    turn, step, kind = event.where
    head, middle = _CHUNK_FRAMES[kind]
    return b'%s%s%s%s%d.%d"}}}' % (prefix, head, event.text_json, middle, turn, step)


def update_frame_prefix(session_id: str) -> bytes:
    """The constant start of every ``session/update`` frame of *session_id*, up to its ``"update":`` value."""
    return b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%s,"update":' % dumps_json(session_id)


def encode_update(update: dict[str, Any]) -> bytes:
    """Compact UTF-8 JSON of an update, the bytes :func:`~dsh.services.sessions.dumps_json` gives.

    Text chunks (nearly every update of a turn, and of a replay) are assembled around one encoding of their
    text instead of walking three nested dicts: this is on the chunk path.
    """
    if type(update) is _TextChunk:
        return b"".join(
            (
                b'{"sessionUpdate":"',
                update["sessionUpdate"].encode(),
                b'","content":{"type":"text","text":',
                _json_text(update["content"]["text"]),
                b'},"messageId":',
                _json_text(update["messageId"]),
                b"}",
            )
        )
    return dumps_json(update)
