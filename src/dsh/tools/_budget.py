"""The output budget: what a tool result may cost the model's context, and where the rest goes.

Every tool result's text is held to one budget (:data:`BUDGETS`, by tool name; :data:`DEFAULT_BUDGET` for the
others, MCP tools included): past it, the head and the tail are kept with one line between them that says what
was cut and names a file holding the whole output, so nothing is lost and ``read_file`` (with ``offset``) or
``grep`` reach the middle. Compilers and test runners print the root cause first and the summary last: both
ends matter, the middle least.

Guarantees:

* The numbers live here and only here. Commands: 30,000 characters or 256 lines (128 + 128), whichever cuts
  more (Claude Code's 30,000 characters, codex's 256 lines); ``read_file`` 30,000 characters, which it pages
  itself within (2,000 lines, its notes and the offset to read on included: :data:`READ_BUDGET`), so the budget
  never cuts a read; everything else 30,000 characters.
* :func:`cut` is pure and deterministic; a result within budget comes back unchanged (same object).
* The spill file is ``<spill root>/<session id>/<call id>.txt`` (UTF-8, the full text, written once, never
  overwritten by another call: the call id is unique in a session, a collision gets a numbered suffix). The
  spill root is ``<data dir>/tool-output`` for durable sessions, a private temporary directory removed with
  the plugin otherwise; the tools may read it like the session's own directory (the plugin adds it to its
  workspace: :meth:`dsh.tools.Workspace.add_spill_root`).
* A spill that cannot be written (a full disk) still cuts the result; the line then says the rest was lost.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dsh.tools._offload import run_io

if TYPE_CHECKING:
    from dsh.kernel import Next
    from dsh.services.tools import ToolExecution, ToolResult

__all__ = [
    "BUDGETS",
    "COMMAND_BUDGET",
    "DEFAULT_BUDGET",
    "READ_BUDGET",
    "Budget",
    "apply_budget",
    "budget_for",
    "budget_step",
    "cut",
    "default_spill_root",
    "over_budget",
    "spill",
]


@dataclass(frozen=True, slots=True)
class Budget:
    max_chars: int
    max_lines: int | None = None


COMMAND_BUDGET = Budget(30_000, 256)
DEFAULT_BUDGET = Budget(30_000)
BUDGETS: dict[str, Budget] = {
    "run_command": COMMAND_BUDGET,
    "command_output": COMMAND_BUDGET,
    "command_wait": COMMAND_BUDGET,
    "read_file": Budget(30_000),
}
READ_BUDGET = BUDGETS["read_file"].max_chars
"""Characters one ``read_file`` result may hold (the read pages itself within it; its schema states it)."""


def budget_for(tool: str) -> Budget:
    return BUDGETS.get(tool, DEFAULT_BUDGET)


def default_spill_root(data_dir: str | None) -> tuple[str, bool]:
    """Where spills go and whether the directory is ours to remove at the end: beside durable sessions
    (``<data dir>/tool-output``, kept: a resumed session may name its spills), else a new private temporary
    directory (removed with the plugin: its sessions vanish with the process too)."""
    if data_dir:
        return os.path.join(os.path.abspath(data_dir), "tool-output"), False
    return tempfile.mkdtemp(prefix="dsh-tool-output-"), True


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def spill(root: str, session: str, call_id: str, text: str) -> str | None:
    """Write *text* to a new file for this call and return its absolute path (None when it could not be
    written). Blocking: call it in a worker thread."""
    directory = os.path.join(root, _UNSAFE.sub("_", session) or "no-session")
    base = _UNSAFE.sub("_", call_id)[:120] or "call"
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        for attempt in range(1000):
            name = f"{base}.txt" if attempt == 0 else f"{base}.{attempt}.txt"
            path = os.path.join(directory, name)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                continue
            with open(fd, "w", encoding="utf-8", newline="") as file:
                file.write(text)
            return path
    except OSError:
        return None
    return None


def _head_tail(text: str, budget: Budget) -> tuple[str, str, int, int] | None:
    """(head, tail, lines cut, characters cut), or None when *text* is within *budget*."""
    lines = text.split("\n")
    over_lines = budget.max_lines is not None and len(lines) > budget.max_lines
    if not over_lines and len(text) <= budget.max_chars:
        return None
    head_lines, tail_lines = lines, []
    if budget.max_lines is not None and over_lines:
        keep = budget.max_lines // 2
        head_lines, tail_lines = lines[:keep], lines[len(lines) - (budget.max_lines - keep) :]
    half = budget.max_chars // 2
    head = "\n".join(head_lines)
    tail = "\n".join(tail_lines) if tail_lines else ""
    if not tail_lines:  # within the line budget: split by characters
        head, tail = head[:half], head[-half:]
    else:
        if len(head) > half:
            head = head[:half]
        if len(tail) > half:
            tail = tail[-half:]
    # Whole lines at the cut where possible.
    if "\n" in head and not text.startswith(head + "\n"):
        head = head[: head.rfind("\n")]
    if "\n" in tail and not text.endswith("\n" + tail):
        tail = tail[tail.find("\n") + 1 :]
    cut_chars = len(text) - len(head) - len(tail)
    cut_lines = max(text.count("\n") + 1 - (head.count("\n") + 1) - (tail.count("\n") + 1), 0)
    return head, tail, cut_lines, cut_chars


def cut(text: str, budget: Budget, spill_path: str | None, *, spilled: bool = True) -> str:
    """*text* held to *budget*: unchanged when within it, else head, a line naming what was cut and where the
    whole text is (*spill_path*; None: it could not be kept), and tail."""
    parts = _head_tail(text, budget)
    if parts is None:
        return text
    head, tail, cut_lines, cut_chars = parts
    total_lines = text.count("\n") + 1
    head_lines = head.count("\n") + 1
    if spill_path is not None:
        where = (
            f"the full output ({total_lines:,} lines) is in {spill_path}: read_file it with offset={head_lines + 1} "
            "to see what was cut, or grep it"
        )
    else:
        where = "the full output could not be saved"
    marker = f"[… {cut_lines:,} lines ({cut_chars:,} characters) cut here; {where}]"
    return f"{head}\n{marker}\n{tail}"


def over_budget(text: str, budget: Budget) -> bool:
    return _head_tail(text, budget) is not None


def _text_of(block: Any) -> str | None:
    text = block.get("text") if block.get("type") == "text" else None
    return text if isinstance(text, str) else None


async def apply_budget(result: ToolResult, execution: ToolExecution, root: str) -> ToolResult:
    """*result* held to its tool's budget: each text block over it is cut (head, a line naming the spill file,
    tail) and the whole text is written once to a spill file whose path the result carries (``spill``)."""

    budget = budget_for(execution.name)
    texts = [_text_of(block) for block in result.content]
    if not any(text is not None and over_budget(text, budget) for text in texts):
        return result
    full = "\n".join(text for text in texts if text is not None)
    agent = execution.agent
    session = agent.session.id if agent is not None else "no-session"
    path = await run_io(spill, root, session, execution.call_id or "call", full)
    content: list[Any] = []
    for block, text in zip(result.content, texts, strict=True):
        if text is not None and over_budget(text, budget):
            content.append({"type": "text", "text": cut(text, budget, path)})
        else:
            content.append(block)
    return dataclasses.replace(result, content=content, spill=path)


def budget_step(root: str) -> Callable[[ToolExecution, Next[ToolExecution, ToolResult]], Awaitable[ToolResult]]:
    """The pipeline's ``budget`` step (the outermost stage, outside ``redact``: what is spilled is what the model
    could have seen, redacted)."""

    async def step(execution: ToolExecution, next_: Next[ToolExecution, ToolResult]) -> ToolResult:
        return await apply_budget(await next_(), execution, root)

    return step
