"""What the terminal view draws, as rich renderables: tool cards, diffs, permission questions, plans.

Pure functions of the data ACP sent (no I/O, no state): the view decides when to draw and where. Every card is
bounded: a diff shows at most :data:`DIFF_LINES` lines and command output its last :data:`TAIL_LINES`, each
with a line saying how much was left out, so one tool call never floods the screen.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text

from dsh.chat._sanitize import sanitize

__all__ = [
    "DIFF_LINES",
    "OPTION_LABELS",
    "DIAGNOSTIC_LINES",
    "TAIL_LINES",
    "diagnostic_lines",
    "diff_lines",
    "option_label",
    "permission_keys",
    "permission_question",
    "plan_view",
    "tool_card",
]

DIFF_LINES = 40
TAIL_LINES = 8
DIAGNOSTIC_LINES = 10
"""Diagnostics drawn under an edit's card (``_meta.dsh.diagnostics``); the rest are counted."""
_DIAGNOSTIC_STYLE = {"error": "red", "warning": "yellow"}
STATUS_MARK = {
    "pending": ("○", "yellow"),
    "in_progress": ("◐", "yellow"),
    "completed": ("✔", "green"),
    "failed": ("✘", "red"),
}
OPTION_LABELS = {
    "allow_once": "Allow",
    "allow_always": "Always allow",
    "reject_once": "Reject",
    "reject_always": "Always reject",
}
"""What a permission option is called on screen: fixed by its kind, never the agent's own label alone."""
PLAN_MARK = {"pending": ("☐", ""), "in_progress": ("▶", "yellow"), "completed": ("✔", "green dim")}


def diff_lines(path: str, old: str | None, new: str) -> list[Text]:
    """A coloured unified diff (a new file when *old* is None), at most :data:`DIFF_LINES` lines."""
    path = sanitize(path, one_line=True)
    before = [] if old is None else sanitize(old).splitlines()
    lines = list(
        difflib.unified_diff(
            before, sanitize(new).splitlines(), fromfile=f"a/{path}", tofile=f"b/{path}", lineterm="", n=2
        )
    )
    out: list[Text] = []
    for line in lines[:DIFF_LINES]:
        style = ""
        if line.startswith(("+++", "---")):
            style = "bold"
        elif line.startswith("+"):
            style = "green"
        elif line.startswith("-"):
            style = "red"
        elif line.startswith("@@"):
            style = "cyan"
        out.append(Text(line, style=style))
    if len(lines) > DIFF_LINES:
        out.append(Text(f"… {len(lines) - DIFF_LINES} more diff lines", style="dim"))
    return out


def _tail(text: str, limit: int = TAIL_LINES) -> list[Text]:
    lines = sanitize(text).rstrip("\n").splitlines()
    out = []
    if len(lines) > limit:
        out.append(Text(f"… {len(lines) - limit} earlier lines", style="dim"))
    out += [Text(line, style="dim") for line in lines[-limit:]]
    return out


def tool_card(
    call: dict[str, Any],
    terminal_output: dict[str, str],
    *,
    show_output: bool = True,
    show_diff: bool = True,
    cwd: str | None = None,
) -> RenderableType:
    """A tool call: status mark, title, kind; the command it runs; its diffs; an edit's new diagnostics; the tail
    of its output.

    *call* is the merged ``tool_call`` and its updates; *terminal_output* the text of the terminals the chat
    served, by id (the output of a command the agent ran through ``terminal/*``); diff paths under *cwd* are
    shown relative to it."""
    status = str(call.get("status") or "pending")
    mark, colour = STATUS_MARK.get(status, ("•", ""))
    header = Text.assemble(
        (f"{mark} ", colour), (sanitize(str(call.get("title") or call.get("toolCallId")), one_line=True), "bold")
    )
    kind = call.get("kind")
    if isinstance(kind, str) and kind != "other":
        header.append(f" · {sanitize(kind, one_line=True)}", style="dim")
    if status == "failed":
        header.append(" · failed", style="red")
    parts: list[RenderableType] = [header]
    raw = call.get("rawInput")
    if kind == "execute" and isinstance(raw, dict) and isinstance(raw.get("command"), str):
        command = sanitize(raw["command"]).replace("\n", "\n    ")  # continuation lines indented under the $
        parts.append(Text(f"  $ {command}", style="bold"))
    raw_content = call.get("content")
    content: list[Any] = raw_content if isinstance(raw_content, list) else []
    diffs = [c for c in content if isinstance(c, dict) and c.get("type") == "diff"]
    for diff in diffs if show_diff else []:
        path = _relative(str(diff.get("path", "")), cwd)
        parts += _indent(diff_lines(path, diff.get("oldText"), str(diff.get("newText", ""))))
    parts += _indent(diagnostic_lines(call, cwd))
    terminals = any(isinstance(c, dict) and c.get("type") == "terminal" for c in content)
    if show_output:
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "terminal":
                parts += _indent(_tail(terminal_output.get(str(block.get("terminalId")), "")))
            elif block.get("type") == "content" and not diffs and not terminals:  # the diff or output says it
                inner = block.get("content")
                if isinstance(inner, dict) and inner.get("type") == "text":
                    parts += _indent(_tail(str(inner.get("text", ""))))
    return Group(*parts)


def diagnostic_lines(call: dict[str, Any], cwd: str | None) -> list[Text]:
    """An edit's new diagnostics (``_meta.dsh.diagnostics`` of its card: ``new``, ``others``, ``notes``), one line
    each, at most :data:`DIAGNOSTIC_LINES`, the rest counted. Everything in them is text a language server (or, with
    ``--agent``, any agent) wrote: every field is sanitised to one line and a line is cut at 300 characters; an
    entry that is not an object is drawn as a note."""
    meta = call.get("_meta")
    dsh = meta.get("dsh") if isinstance(meta, dict) else None
    found = dsh.get("diagnostics") if isinstance(dsh, dict) else None
    if not isinstance(found, dict):
        return []
    entries: list[Any] = []
    for group in ("new", "others", "notes"):
        items = found.get(group)
        if isinstance(items, list):
            entries += items
    lines = [_diagnostic_line(entry, cwd) for entry in entries[:DIAGNOSTIC_LINES]]  # only what is drawn is read
    if len(entries) > DIAGNOSTIC_LINES:
        lines.append(Text(f"… {len(entries) - DIAGNOSTIC_LINES} more diagnostics", style="dim"))
    return lines


def _diagnostic_line(entry: Any, cwd: str | None) -> Text:
    if not isinstance(entry, dict):  # a note (a server that failed, none in time)
        return Text(sanitize(str(entry), one_line=True), style="dim")
    path = sanitize(_relative(str(entry.get("path", "")), cwd), one_line=True)
    line = entry.get("line")
    where = f"{path}:{line}" if isinstance(line, int) and not isinstance(line, bool) else path
    severity = sanitize(str(entry.get("severity", "")), one_line=True)
    source = sanitize(str(entry.get("source") or ""), one_line=True)
    server = sanitize(str(entry.get("server") or ""), one_line=True)
    message = sanitize(str(entry.get("message", "")), one_line=True)
    said = f"{where}: {severity}: {message}" + (f" [{source}]" if source else "") + (f" ({server})" if server else "")
    if len(said) > 300:
        said = said[:299] + "…"
    return Text(f"⚠ {said}", style=_DIAGNOSTIC_STYLE.get(severity, "dim"))


def _relative(path: str, cwd: str | None) -> str:
    if cwd is not None and path.startswith(cwd.rstrip("/") + "/"):
        return path[len(cwd.rstrip("/")) + 1 :]
    return path.lstrip("/")


def _indent(lines: Iterable[Text]) -> list[Text]:
    return [Text("  ") + line for line in lines]


def permission_keys(options: list[dict[str, Any]]) -> dict[str, str]:
    """Keys to option ids: ``y`` the first allow-once option, ``a`` allow-always, ``n`` reject (once, else
    always), and ``1``…``9`` every option by position."""
    keys: dict[str, str] = {}
    for key, kinds in (("y", ("allow_once",)), ("a", ("allow_always",)), ("n", ("reject_once", "reject_always"))):
        for kind in kinds:
            found = next((o for o in options if o.get("kind") == kind), None)
            if found is not None:
                keys[key] = str(found["optionId"])
                break
    for index, option in enumerate(options[:9], start=1):
        keys[str(index)] = str(option["optionId"])
    return keys


def option_label(option: dict[str, Any]) -> str:
    """The chat's fixed label for *option*'s kind; the agent's own name follows, sanitised and quoted, when it
    says more (``Always allow ("Always allow edit_file")``); an option of unknown kind is only the quoted name."""
    fixed = OPTION_LABELS.get(str(option.get("kind")))
    name = sanitize(str(option.get("name", option.get("optionId", ""))), one_line=True)
    if fixed is None:
        return f"(unknown kind) \u201c{name}\u201d"
    return fixed if name in ("", fixed) else f"{fixed} (\u201c{name}\u201d)"


def permission_question(options: list[dict[str, Any]]) -> Text:
    """``Allow? [y] Allow  [a] Always allow ("Always allow edit_file")  [n] Reject  (Ctrl+C cancels the turn)``:
    drawn from the options' kinds with fixed labels; the agent's labels only as sanitised data."""
    letters = {v: k for k, v in permission_keys(options).items() if k.isalpha()}
    text = Text("Allow? ", style="bold yellow")
    for index, option in enumerate(options[:9], start=1):
        key = letters.get(str(option["optionId"]), str(index))
        text.append(f"[{key}] ", style="bold cyan")
        text.append(f"{option_label(option)}  ")
    text.append("(Ctrl+C cancels the turn)", style="dim")
    return text


def plan_view(entries: list[dict[str, Any]]) -> RenderableType:
    lines = [Text("Plan", style="bold")]
    for entry in entries:
        mark, style = PLAN_MARK.get(str(entry.get("status")), ("•", ""))
        lines.append(Text(f"  {mark} {sanitize(str(entry.get('content', '')), one_line=True)}", style=style))
    return Group(*lines)
