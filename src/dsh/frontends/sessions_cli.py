"""``dsh sessions``: list, show, export and delete stored sessions from a terminal.

The renderers are pure functions of a session's header and events (no I/O, no clock): what ``show`` prints and
what ``export --format markdown`` writes are two spellings of one transcript (:func:`build_transcript`). The
readers are small functions over the JSONL store.

Guarantees:

* Reading (``list``, ``show``, ``export``) never writes, locks or repairs a session file: the file is read once,
  read-only, so it works while a daemon holds the session's advisory lock, and the file stays byte-for-byte as it
  was. A torn final line (a write in progress, or a crash) is left out; a bad line before it is an error that
  names the file and line (:class:`~dsh.plugins.persistence.CorruptSessionError`).
* Deleting goes through :meth:`JsonlPersistence.delete`, so a session held by another process is refused
  (:class:`~dsh.plugins.persistence.SessionLockedError`), never removed from under its writer.
* Every id passes :func:`~dsh.services.sessions.check_session_id` before any path is built from it: no input
  names a file outside the data directory, and an invalid id touches nothing.
* Rendered text holds no control characters but newline and tab: anything else a session stores (terminal escape
  sequences, carriage returns) is shown escaped as ``\\xNN``, so showing a session cannot drive the terminal.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import typer

from dsh.plugins.persistence import (
    CorruptSessionError,
    JsonlPersistence,
    SessionLockedError,
    SessionNotFoundError,
    default_data_dir,
    scan,
)
from dsh.services.sessions import SessionEvent, SessionHeader, SessionInfo, check_session_id, parse_json
from dsh.worktrees import (
    Worktree,
    WorktreeError,
    WorktreeStore,
    check_clean,
    merge_hint,
    remove_worktree,
    worktree_state,
)

__all__ = [
    "InvalidSessionIdError",
    "Item",
    "StoredSession",
    "Turn",
    "build_transcript",
    "complete_lines",
    "delete_session",
    "describe_end",
    "hidden_note",
    "render_children",
    "list_sessions",
    "parse_session",
    "read_raw",
    "read_session",
    "render_list",
    "render_markdown",
    "render_transcript",
    "worktree_text",
    "reported_errors",
    "resolve_data_dir",
    "valid_id",
]


class InvalidSessionIdError(ValueError):
    """An id that :func:`check_session_id` refuses; the CLI exits 2 and touches nothing."""


# -- reading ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StoredSession:
    """A snapshot of a session file as it was read (never repaired)."""

    header: SessionHeader
    events: list[SessionEvent]
    torn_tail: bool = False
    """True when the file ended in an incomplete or unreadable final line, which was left out."""


def resolve_data_dir(option: str | Path | None) -> Path:
    """``--data-dir`` when given, else ``DSH_DATA_DIR``, else the XDG data directory."""
    return Path(option) if option else default_data_dir()


def valid_id(raw: str) -> str:
    """*raw* if it is a storable session id; :class:`InvalidSessionIdError` (with the rule) otherwise."""
    try:
        return check_session_id(raw)
    except ValueError as exc:
        raise InvalidSessionIdError(str(exc)) from None


def _path_of(root: Path, session_id: str) -> Path:
    return JsonlPersistence(root).path_of(valid_id(session_id))


def read_raw(root: Path, session_id: str) -> bytes:
    """The bytes of a stored session's file, read once and read-only (no lock taken, nothing written)."""
    path = _path_of(root, session_id)
    try:
        with path.open("rb") as file:
            return file.read()
    except FileNotFoundError:
        raise SessionNotFoundError(f"no stored session {session_id!r} in {root}") from None


def complete_lines(content: bytes) -> bytes:
    """*content* up to and including its last newline: every complete line, verbatim, and no torn tail."""
    end = content.rfind(b"\n")
    return content[: end + 1]


def parse_session(content: bytes, where: str) -> StoredSession:
    """Parse a session file's bytes without repairing anything, with the persistence format's own rules
    (:func:`dsh.plugins.persistence.scan`): a torn final line is left out and ``torn_tail`` is set,
    any bad line before it raises :class:`CorruptSessionError` naming *where* and the line. The closers a
    load would append to an interrupted turn are not shown: the file does not have them (yet)."""
    result = scan(content, where)
    events = result.events[: len(result.events) - len(result.closers)]
    return StoredSession(result.header, events, result.keep_bytes < len(content))


def read_session(root: Path, session_id: str) -> StoredSession:
    """A stored session as it is on disk now (see the module's reading guarantees)."""
    return parse_session(read_raw(root, session_id), str(_path_of(root, session_id)))


def _normal(path: str) -> str:
    return os.path.normpath(os.path.abspath(path))


async def list_sessions(root: Path, cwd: str | None = None, *, include_empty: bool = False) -> list[SessionInfo]:
    """Stored sessions, most recently updated first; with *cwd*, only those whose directory is *cwd*
    (compared as normalised absolute paths, a relative *cwd* taken from the current directory). Sessions never
    used (``empty``) are included only with *include_empty*."""
    infos = await JsonlPersistence(root).list(include_empty=include_empty)
    if cwd is None:
        return infos
    wanted = _normal(cwd)
    worktrees = WorktreeStore(root).all()  # a worktree session was started in its origin: found there too

    def places(info: SessionInfo) -> set[str]:
        worktree = worktrees.get(info.id)
        return {_normal(info.cwd or "")} | ({_normal(worktree.origin)} if worktree is not None else set())

    return [info for info in infos if info.cwd is not None and wanted in places(info)]


async def delete_session(root: Path, session_id: str, *, force: bool = False) -> str | None:
    """Remove a stored session, and its worktree (RFC 0040: the branch too when it has no commits of its own; the
    returned line says what happened to them, None for a session without a worktree). An unknown id raises
    :class:`SessionNotFoundError`; a session held by another process raises :class:`SessionLockedError` and stays;
    a worktree with uncommitted changes raises :class:`~dsh.worktrees.WorktreeError` (``WORKTREE_DIRTY``) and
    nothing is removed, unless *force*."""
    import anyio.to_thread

    path = _path_of(root, session_id)
    if not path.is_file():
        raise SessionNotFoundError(f"no stored session {session_id!r} in {root}")
    worktree = WorktreeStore(root).get(session_id)
    if worktree is not None and not force:
        await anyio.to_thread.run_sync(check_clean, worktree)
    await JsonlPersistence(root).delete(session_id)
    if worktree is None:
        return None
    removed = await anyio.to_thread.run_sync(lambda: remove_worktree(root, worktree, force=True))
    return removed.message


def worktree_text(root: Path, session_id: str) -> str | None:
    """What ``dsh sessions show`` says of the session's worktree: where, its state, how to merge (None: none)."""
    worktree = WorktreeStore(root).get(session_id)
    if worktree is None:
        return None
    try:
        return merge_hint(worktree, worktree_state(worktree))
    except WorktreeError as error:  # git missing, or failing on the worktree: the facts we have, and why
        return f"Worktree: {worktree.path} (branch {worktree.branch} of {worktree.repo}); git: {error.message}"


# -- the transcript model -----------------------------------------------------------------------------------

ItemKind = Literal[
    "user", "context", "steering", "reasoning", "assistant", "partial", "tool_call", "tool_result", "error"
]


@dataclass(frozen=True, slots=True)
class Item:
    """One thing said or done in a turn, in log order.

    ``label`` names the speaker or tool; ``call_id`` ties a tool call to its result; ``flag`` qualifies it
    (``"error"`` on a failed tool result, ``"not run"`` on a requested call that was never executed,
    ``"reasoning"`` on partial reasoning); ``code`` is an error code when one was recorded.
    """

    kind: ItemKind
    text: str
    label: str = ""
    call_id: str = ""
    flag: str = ""
    code: str = ""


@dataclass(slots=True)
class Turn:
    """A turn: ``number`` is None for events outside any turn; ``end`` is None when no ``turn/end`` was read."""

    number: int | None
    started_at: float | None
    trigger: str
    items: list[Item] = field(default_factory=list)
    end: dict[str, Any] | None = None


def _source_label(source: Any) -> str:
    if not isinstance(source, dict):
        return "user"
    kind = source.get("kind")
    if kind == "plugin":
        return f"plugin {source.get('plugin', '?')}"
    if kind == "agent":
        return f"agent {source.get('agent_id', '?')}"
    return str(kind or "user")


def _image_text(block: dict[str, Any]) -> str:
    """An image as a note: its description when dsh made the block (RFC 0022), never its bytes."""
    url = block.get("url")
    if type(block.get("width")) is int:
        from dsh.images import describe_image

        return f"[image: {describe_image(block)}]"
    if isinstance(url, str) and url.startswith("data:"):
        return f"[image: {url.split(',', 1)[0]}, {len(url)} characters]"
    if isinstance(url, str) and url.startswith("dsh-blob:"):  # the bytes are in the data directory's blobs/
        return f"[image: {url[len('dsh-blob:') :].split(';', 1)[0]}, stored apart]"
    return f"[image: {url}]"


def content_text(content: Any) -> str:
    """The readable text of a list of content blocks (images and other blocks as bracketed notes)."""
    if not isinstance(content, list):
        return "" if content is None else str(content)
    parts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            parts.append(str(block))
            continue
        kind = block.get("type")
        if kind in ("text", "reasoning"):
            parts.append(str(block.get("text", "")))
        elif kind == "image":
            parts.append(_image_text(block))
        elif kind == "tool-call":
            parts.append(f"[tool call {block.get('name', '?')}: {block.get('arguments', '')}]")
        elif kind == "tool-result":
            parts.append(content_text(block.get("content")))
        else:
            parts.append(f"[{kind} block]")
    return "\n".join(parts)


def format_arguments(arguments: Any) -> str:
    """Tool-call arguments for reading: JSON text pretty-printed, anything unparseable verbatim."""
    if isinstance(arguments, str):
        if not arguments.strip():
            return "{}"
        try:
            value = parse_json(arguments)
        except ValueError:
            return arguments
    else:
        value = arguments
    return json.dumps(value, indent=2, ensure_ascii=False)


def _trigger(data: dict[str, Any]) -> str:
    trigger = data.get("trigger")
    if isinstance(trigger, dict) and isinstance(trigger.get("kind"), str):
        return str(trigger["kind"])
    return "message"


def build_transcript(events: Sequence[SessionEvent]) -> list[Turn]:
    """The session as turns of readable items (pure; tolerant of any event order).

    The assistant's words come from ``assistant/message``; streamed chunks are used only for a step that ended
    without one (cut off by a cancel or a crash), as a ``partial`` item. Tool calls come from ``tool/call``; a
    call the model requested that never ran appears with the flag ``"not run"``.
    """
    executed = {e.data.get("call_id") for e in events if e.type == "tool/call"}
    names: dict[Any, str] = {}
    turns: list[Turn] = []
    current: Turn | None = None
    streamed: dict[str, list[str]] = {"reasoning": [], "text": []}
    answered = False

    def turn() -> Turn:
        nonlocal current
        if current is None:
            current = Turn(None, None, "none")
            turns.append(current)
        return current

    def flush_partial() -> None:
        nonlocal answered
        if not answered:
            for kind, pieces in streamed.items():
                text = "".join(pieces)
                if text:
                    turn().items.append(Item("partial", text, flag="reasoning" if kind == "reasoning" else ""))
        streamed["reasoning"], streamed["text"] = [], []
        answered = False

    for event in events:
        data, kind = event.data, event.type
        if kind == "turn/start":
            flush_partial()
            number = data.get("turn")
            current = Turn(number if isinstance(number, int) else None, event.time, _trigger(data))
            turns.append(current)
        elif kind == "turn/end":
            flush_partial()
            reason = data.get("reason")
            turn().end = reason if isinstance(reason, dict) else {"kind": str(reason)}
            current = None
        elif kind in ("step/start", "step/end"):
            flush_partial()
        elif kind == "assistant/chunk":
            chunk = data.get("chunk")
            if isinstance(chunk, dict) and chunk.get("type") in ("text-delta", "reasoning-delta"):
                key = "text" if chunk["type"] == "text-delta" else "reasoning"
                streamed[key].append(str(chunk.get("text", "")))
        elif kind == "user/message":
            turn().items.append(Item("user", content_text(data.get("content")), _source_label(data.get("source"))))
        elif kind in ("context/message", "steering/message"):
            item_kind: ItemKind = "context" if kind == "context/message" else "steering"
            turn().items.append(Item(item_kind, content_text(data.get("content")), _source_label(data.get("source"))))
        elif kind == "assistant/message":
            answered = True
            for block in data.get("content") or []:
                if not isinstance(block, dict):
                    continue
                block_kind = block.get("type")
                if block_kind == "reasoning":
                    turn().items.append(Item("reasoning", str(block.get("text", ""))))
                elif block_kind == "tool-call":
                    if block.get("id") not in executed:
                        turn().items.append(
                            Item(
                                "tool_call",
                                format_arguments(block.get("arguments", "")),
                                str(block.get("name", "?")),
                                str(block.get("id", "")),
                                "not run",
                            )
                        )
                else:
                    turn().items.append(Item("assistant", content_text([block])))
        elif kind == "tool/call":
            name = str(data.get("name", "?"))
            names[data.get("call_id")] = name
            turn().items.append(
                Item("tool_call", format_arguments(data.get("arguments", "")), name, str(data.get("call_id", "")))
            )
        elif kind == "tool/result":
            error = data.get("error")
            code = error.get("code") if isinstance(error, dict) else None
            turn().items.append(
                Item(
                    "tool_result",
                    content_text(data.get("content")),
                    names.get(data.get("call_id"), ""),
                    str(data.get("call_id", "")),
                    "error" if data.get("is_error") else "",
                    str(code) if code else "",
                )
            )
        elif kind == "error":
            code = data.get("code")
            turn().items.append(Item("error", str(data.get("message", "")), code=str(code) if code else ""))
    flush_partial()
    return turns


def describe_end(reason: dict[str, Any] | None) -> str:
    """How a turn ended, in words; ``None`` (no ``turn/end`` recorded) says so rather than guessing."""
    if reason is None:
        return "no end recorded (still running, or the process stopped; loading the session marks it interrupted)"
    kind = reason.get("kind")
    if kind == "completed":
        return "completed"
    if kind == "aborted":
        why = reason.get("reason")
        return f"cancelled ({why})" if why else "cancelled"
    if kind == "interrupted":
        return "interrupted (the process stopped before the turn finished)"
    if kind == "error":
        code = reason.get("code")
        return f"error: {reason.get('message', 'unknown error')}" + (f" [{code}]" if code else "")
    if kind == "max-tokens":
        return "stopped at the model's max tokens limit"
    if kind == "disposed":
        return "disposed (the agent was shut down during the turn)"
    return str(kind)


# -- rendering ----------------------------------------------------------------------------------------------

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _clean(text: str) -> str:
    """*text* with CRLF as LF and every control character but newline and tab escaped as ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text.replace("\r\n", "\n"))


def _local(stamp: float | None) -> str:
    if not stamp:
        return "unknown time"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))


def _turn_title(turn: Turn) -> str:
    if turn.number is None:
        return "Outside any turn"
    title = f"Turn {turn.number}"
    if turn.trigger == "injection":
        title += " (injected context)"
    elif turn.trigger == "continuation":
        title += " (continuation)"
    return title


def _item_heading(item: Item) -> str:
    match item.kind:
        case "user":
            return "User" if item.label == "user" else f"Message from {item.label}"
        case "context":
            return f"Context from {item.label}"
        case "steering":
            return f"Steering from {item.label}"
        case "reasoning":
            return "Reasoning"
        case "assistant":
            return "Assistant"
        case "partial":
            what = "Reasoning" if item.flag == "reasoning" else "Assistant"
            return f"{what} (partial: streamed, the step did not finish)"
        case "tool_call":
            suffix = " (requested, not run)" if item.flag else ""
            return f"Tool call {item.label} [{item.call_id}]{suffix}"
        case "tool_result":
            name = f"{item.label} " if item.label else ""
            status = " (error" + (f" {item.code}" if item.code else "") + ")" if item.flag == "error" else ""
            return f"Tool result {name}[{item.call_id}]{status}"
        case "error":
            return "Error" + (f" [{item.code}]" if item.code else "")
    return item.kind  # pragma: no cover - every kind is matched above


def _header_facts(header: SessionHeader, events: Sequence[SessionEvent], torn: bool) -> list[tuple[str, str]]:
    facts = [("cwd", header.cwd or "(none)"), ("created", _local(header.created_at))]
    if events:
        facts.append(("updated", _local(events[-1].time)))
    if header.parent_session:
        facts.append(("forked from", header.parent_session))
    facts.append(("events", str(len(events))))
    if torn:
        facts.append(("note", "the file ends in an incomplete line (a write in progress or a crash); not shown"))
    return facts


def render_transcript(session: StoredSession) -> str:
    """A plain-text transcript for a terminal (see :func:`build_transcript` for what it contains)."""
    out = [f"Session {session.header.id}"]
    out.extend(f"  {name}: {value}" for name, value in _header_facts(session.header, session.events, session.torn_tail))
    turns = build_transcript(session.events)
    if not turns:
        out += ["", "(no turns yet)"]
    for turn in turns:
        out += ["", f"=== {_turn_title(turn)} · {_local(turn.started_at)} ==="]
        for item in turn.items:
            if item.kind == "error":
                out += ["", f"{_item_heading(item)}: {item.text}"]
                continue
            out += ["", f"{_item_heading(item)}:"]
            out.extend(f"  {line}" if line else "" for line in (item.text or "(empty)").split("\n"))
        if turn.number is not None:
            out += ["", f"--- {_turn_title(turn)} ended: {describe_end(turn.end)} ---"]
    return _clean("\n".join(out) + "\n")


def _fence(text: str, info: str = "") -> list[str]:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    marker = "`" * max(3, longest + 1)
    return [marker + info, *text.split("\n"), marker]


def _code(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    marker = "`" * (longest + 1)
    padded = f" {text} " if text.startswith("`") or text.endswith("`") else text
    return f"{marker}{padded}{marker}"


def _quote(text: str) -> list[str]:
    return [f"> {line}" if line else ">" for line in (text or "(empty)").split("\n")]


def _md_item(item: Item) -> list[str]:
    match item.kind:
        case "user" | "context" | "steering":
            return [f"**{_item_heading(item)}**", "", *_quote(item.text)]
        case "reasoning":
            return ["*Reasoning*", "", *_quote(item.text)]
        case "assistant":
            return ["**Assistant**", "", item.text or "*(empty)*"]
        case "partial":
            return [f"*{_item_heading(item)}*", "", *_quote(item.text)]
        case "tool_call":
            suffix = " (requested, not run)" if item.flag else ""
            head = f"**Tool call{suffix}** {_code(item.label)} ({_code(item.call_id)})"
            return [head, "", *_fence(item.text, "json" if item.text[:1] in "{[" else "")]
        case "tool_result":
            status = " (error" + (f" {_code(item.code)}" if item.code else "") + ")" if item.flag == "error" else ""
            name = f" {_code(item.label)}" if item.label else ""
            return [f"**Tool result{status}**{name} ({_code(item.call_id)})", "", *_fence(item.text)]
        case "error":
            code = f" ({_code(item.code)})" if item.code else ""
            return [f"**Error**{code}: {item.text}"]
    return []  # pragma: no cover - every kind is matched above


def render_markdown(session: StoredSession) -> str:
    """The transcript as a Markdown document: one ``##`` section per turn, tool traffic in code fences."""
    out = [f"# Session {_code(session.header.id)}", ""]
    for name, value in _header_facts(session.header, session.events, session.torn_tail):
        shown = _code(value) if name in ("cwd", "forked from") else value
        out.append(f"- **{name}:** {shown}")
    turns = build_transcript(session.events)
    if not turns:
        out += ["", "*No turns yet.*"]
    for turn in turns:
        out += ["", f"## {_turn_title(turn)}", "", f"*{_local(turn.started_at)}*"]
        for item in turn.items:
            out += ["", *_md_item(item)]
        if turn.number is not None:
            out += ["", f"*{_turn_title(turn)} ended: {describe_end(turn.end)}*"]
    return _clean("\n".join(out) + "\n")


def render_children(infos: Sequence[SessionInfo], session_id: str) -> str:
    """The sub-agents' sessions of *session_id* (``""`` when none): what ``dsh sessions show`` adds after the
    transcript, so a parent leads to its children (hidden from ``dsh sessions list`` without ``--all``)."""
    children = [info for info in infos if info.parent_session == session_id and info.parent_call is not None]
    if not children:
        return ""
    lines = ["", "Sub-agents:"]
    for info in sorted(children, key=lambda info: info.created_at):
        title = f"  {info.title}" if info.title else ""
        lines.append(f"  {info.id}  (call {info.parent_call}){title}")
    return "\n".join(lines) + "\n"


def hidden_note(count: int, subagents: int = 0) -> str:
    """What ``dsh sessions list`` says about the sessions it left out (``""`` when none): a session an editor
    created and never prompted (``make demo`` makes one) would otherwise look like a lost one; *subagents*:
    sessions of sub-agents (``task``), reached through their parent."""
    from dsh._text import plural

    parts = [plural(count, "empty session")] if count else []
    if subagents:
        parts.append(plural(subagents, "sub-agent session"))
    if not parts:
        return ""
    return f"{' and '.join(parts)} hidden; --all shows {'it' if count + subagents == 1 else 'them'}"


def render_list(infos: Sequence[SessionInfo], worktrees: Mapping[str, Worktree] | None = None) -> str:
    """One line per session, in the given order: id, last update (local time), cwd, title; columns aligned. A
    session in a worktree (*worktrees*, by id) shows the directory it was started in and ``[its branch]`` before
    its title."""
    worktrees = worktrees or {}

    def row(info: SessionInfo) -> tuple[str, str, str, str]:
        title = "(empty)" if info.empty else info.title or "(no title)"
        worktree = worktrees.get(info.id)
        if worktree is not None:
            return info.id, _local(info.updated_at), worktree.origin, f"[{worktree.branch}] {title}"
        return info.id, _local(info.updated_at), info.cwd or "-", title

    rows = [row(info) for info in infos]
    if not rows:
        return ""
    id_width = max(len(row[0]) for row in rows)
    cwd_width = max(len(row[2]) for row in rows)
    lines = [f"{i:<{id_width}}  {updated}  {cwd:<{cwd_width}}  {title}".rstrip() for i, updated, cwd, title in rows]
    return _clean("\n".join(lines) + "\n")


# -- errors -------------------------------------------------------------------------------------------------


@contextmanager
def reported_errors() -> Iterator[None]:
    """Turn the store's failures into a one-line message on stderr and an exit code: 2 for an invalid id,
    1 for an unknown, locked, corrupt or unreadable session and for a worktree that cannot be removed. Nothing
    else is caught."""
    try:
        yield
    except InvalidSessionIdError as exc:
        typer.echo(f"dsh: {exc}", err=True)
        raise typer.Exit(2) from None
    except (SessionNotFoundError, SessionLockedError, CorruptSessionError) as exc:
        typer.echo(f"dsh: {exc}", err=True)
        raise typer.Exit(1) from None
    except WorktreeError as exc:  # a worktree with uncommitted changes, git missing (RFC 0040)
        typer.echo(f"dsh: {exc.message}", err=True)
        raise typer.Exit(1) from None
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, and keep the interpreter's final flush from failing.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
        raise typer.Exit(1) from None
    except OSError as exc:
        typer.echo(f"dsh: {exc}", err=True)
        raise typer.Exit(1) from None
