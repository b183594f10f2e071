"""Compaction: older history summarised by a model, the most recent turns kept verbatim.

Algorithm (``rfcs/0014-context.md``):

1. *When*: before a step, when the context in use (:mod:`._accounting`) passes ``threshold`` times the model's window
   (off when the window is unknown); when the provider rejects a step as too long (overflow: one compaction, one
   retry); on demand (``agent.compact(instructions)``).
2. *Where to cut*: at the ``turn/start`` of the oldest of the ``keep_recent_turns`` most recent turns (a cut
   never splits a tool call from its result). Nothing older than the cut that is not already summarised →
   nothing to do. Inside a running turn whose own recent part is too big to keep (more than the tail budget), the
   cut moves into the turn, to the ``step/start`` of the earliest step from which the steps to the end fit the
   budget (at most every completed step is summarised): a step boundary, so every call stays with its result.
   The turn's user messages (and steering) before that cut stay verbatim after the summary (``keep``).
3. *Summary*: one model call (the session's model, or ``compaction.model``) with a dedicated prompt and the older
   part as a transcript (the previous summary first, long tool outputs clipped); its text is the summary.
4. *Record*: a ``context/compaction`` session event ``{summary, upto, keep?, trigger, model, tokens_before,
   tokens_after, window}``; from then on ``Session.derive_messages()`` yields the summary in place of every event
   before ``upto`` but those of ``keep`` (live and after a load: the log is append-only, nothing is deleted).

Guarantees: the event is appended only after a summary was produced, so a cancel (the step's cancel token) or a
failed summarisation leaves the history exactly as it was.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import anyio

from dsh._log import get_logger
from dsh.context._notes import SESSION_NOTE_OPENING
from dsh.errors import DshError
from dsh.images import describe_image
from dsh.kernel import AbortedError
from dsh.services.llm import GenerateRequest, estimate_request
from dsh.services.sessions import COMPACTION_EVENT

if TYPE_CHECKING:
    from collections.abc import Sequence

    from dsh.kernel import CancelToken, Context
    from dsh.services.llm import Message
    from dsh.services.sessions import Session

__all__ = ["SUMMARY_PROMPT", "CompactionPlan", "build_summary_request", "plan_compaction", "summarise", "transcript"]

SUMMARY_PROMPT = """\
You are compacting the history of a coding session between a user and dsh, a coding agent, so that the work can continue with less context. The agent will see only your summary in place of the history, followed by the most recent part verbatim (when the work is in the middle of a task, the user's request for it and the latest steps).

Write a concise, factual summary that keeps everything needed to continue:
- the user's goals, requests and constraints, in their own terms;
- decisions made and why;
- files read, created or changed (exact paths) and what changed in them;
- commands run and their outcomes, especially failures and error messages;
- the current state of the work and what remains to do.

Keep exact names (files, functions, identifiers, error messages). Do not invent anything; leave out chit-chat. Answer with the summary only."""

log = get_logger("dsh.context")
BLOCK_CLIP = 2_000
"""Characters of one tool output or message block kept in the transcript the summariser reads."""


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    upto: int
    """The first seq kept verbatim: every event before it is summarised."""
    previous: str | None
    messages: list[Message]
    """The messages (of the current view) to summarise, the previous summary not included."""
    keep: tuple[int, ...] = ()
    """Seqs before ``upto`` whose messages stay verbatim (the running turn's user messages, for a cut inside it)."""


def plan_compaction(
    session: Session,
    turn_starts: list[int],
    keep_recent_turns: int,
    *,
    in_turn: bool,
    turn_start: int | None = None,
    step_starts: Sequence[int] = (),
    tail_budget: int | None = None,
) -> CompactionPlan | None:
    """Where to cut (see the module docstring), or None when nothing can be summarised. *turn_start* and
    *step_starts* (the running turn's ``turn/start`` and ``step/start`` seqs, the step in flight last) and
    *tail_budget* (estimated tokens) allow a cut inside the running turn."""
    plan = _turn_plan(session, turn_starts, keep_recent_turns, in_turn=in_turn)
    if not in_turn or turn_start is None or tail_budget is None or not step_starts:
        return plan
    view = session.view()
    upto = plan.upto if plan is not None else turn_start
    if estimate_request(m for seq, m in view if seq >= upto) <= tail_budget:
        return plan
    return _step_plan(session, view, turn_start, step_starts, tail_budget) or plan


def _step_plan(
    session: Session,
    view: list[tuple[int, Message]],
    turn_start: int,
    step_starts: Sequence[int],
    tail_budget: int,
) -> CompactionPlan | None:
    """A cut at a step boundary of the running turn (see the module docstring)."""
    candidates = [seq for seq in step_starts if seq > turn_start]
    if not candidates:
        return None
    tails: dict[int, int] = {}
    total, index = 0, len(view) - 1
    for start in reversed(candidates):  # each candidate's tail: everything from its step/start on
        while index >= 0 and view[index][0] >= start:
            total += estimate_request([view[index][1]])
            index -= 1
        tails[start] = total
    upto = next((seq for seq in candidates if tails[seq] <= tail_budget), candidates[-1])
    keep = tuple(
        seq
        for seq, message in view
        if turn_start <= seq < upto
        and message["role"] == "user"
        and not any(block["type"] == "tool-result" for block in message["content"])
    )
    previous, messages = session.messages_before(upto, keep)
    if not messages:
        return None
    return CompactionPlan(upto, previous, messages, keep)


def _turn_plan(
    session: Session, turn_starts: list[int], keep_recent_turns: int, *, in_turn: bool
) -> CompactionPlan | None:
    keep = max(keep_recent_turns, 1 if in_turn else 0)
    while True:
        if keep == 0:
            upto = session.seq
        elif len(turn_starts) >= keep:
            upto = turn_starts[-keep]
        else:
            upto = turn_starts[0] if turn_starts else 0
        previous, messages = session.messages_before(upto)
        if messages:
            return CompactionPlan(upto, previous, messages)
        if keep <= (1 if in_turn else 0):
            return None
        keep = 1 if in_turn else 0  # too few turns to keep that many: keep only what must stay


def _clip(text: str) -> str:
    if len(text) <= BLOCK_CLIP:
        return text
    return text[:BLOCK_CLIP] + f" […{len(text) - BLOCK_CLIP} more characters]"


def transcript(plan: CompactionPlan) -> str:
    """The older part of the conversation as plain text for the summariser (the session notes left out: the mode
    and the date are told again after a compaction, :mod:`._notes`)."""
    lines: list[str] = []
    if plan.previous:
        lines.append(f"<previous-summary>\n{plan.previous}\n</previous-summary>\n")
    for message in plan.messages:
        role = message["role"]
        first = message["content"][0] if message["content"] else None
        if role == "user" and isinstance(first, dict) and first.get("text") == SESSION_NOTE_OPENING:
            continue
        for raw in message["content"]:
            block = cast(dict[str, Any], raw)
            kind = block.get("type")
            if kind == "text":
                lines.append(f"[{role}] {_clip(block['text'])}")
            elif kind == "tool-call":
                lines.append(f"[assistant called {block['name']}] {_clip(block['arguments'])}")
            elif kind == "tool-result":
                texts = " ".join(
                    b.get("text", "") if b.get("type") == "text" else f"[image: {describe_image(b)}]"
                    for b in block.get("content") or []
                    if b.get("type") in ("text", "image")
                )
                status = "error" if block.get("is_error") else "result"
                lines.append(f"[tool {status}] {_clip(texts)}")
            elif kind == "image":
                lines.append(f"[{role} sent an image: {describe_image(block)}]")
    return "\n".join(lines)


def build_summary_request(
    plan: CompactionPlan, model: str, signal: CancelToken | None, instructions: str | None = None
) -> GenerateRequest:
    """The summarisation call: the dedicated prompt as system, the transcript as the one user message."""
    text = "<conversation>\n" + transcript(plan) + "\n</conversation>\n\nSummarise the conversation above."
    if instructions:
        text += f"\n\nThe user asks you to focus on: {instructions}"
    return GenerateRequest(
        model=model,
        messages=[{"role": "user", "content": [{"type": "text", "text": text}]}],
        system=SUMMARY_PROMPT,
        signal=signal,
    )


SUMMARY_FLOOR = 4_096
"""Characters a summary may always have, whatever it summarises (a three-line conversation may well be summarised
in more words than it had: harmless)."""


async def summarise(ctx: Context, request: GenerateRequest) -> str:
    """Run the summarisation call; a cancel of *request*'s token cancels it (``AbortedError``).

    A summary longer than the transcript it was given (beyond :data:`SUMMARY_FLOOR` characters) does not shrink
    the history: it is refused and asked for once more, and a second such summary raises ``DshError``
    (``SUMMARY_TOO_LONG``), so the history stays as it was. Accepting it would have every later turn fail on a
    window that the summary alone fills, until the summarising model behaves (issue #30)."""
    source = sum(
        len(str(block.get("text", "")))
        for message in request.messages
        for block in message["content"]
        if block.get("type") == "text"
    )
    limit = max(source, SUMMARY_FLOOR)
    text = ""
    for attempt in (1, 2):
        text = await _summarise_once(ctx, request)
        if len(text) <= limit:
            return text
        log.warning("refused a summary longer than the history it summarises", attempt=attempt, chars=len(text))
    raise DshError(
        f"compaction failed twice: the summarising model returned {len(text):,} characters for a history of "
        f"{source:,}; the conversation was not compacted",
        "SUMMARY_TOO_LONG",
    )


async def _summarise_once(ctx: Context, request: GenerateRequest) -> str:
    """Run the summarisation call once; a cancel of *request*'s token cancels it (``AbortedError``)."""
    signal = request.signal
    text = ""
    with anyio.CancelScope() as scope:
        remove = signal.add_callback(lambda _reason: scope.cancel()) if signal is not None else None
        try:
            result = await ctx.llm.generate(request)
        finally:
            if remove is not None:
                remove()
        finish = result.finish
        if finish is not None and finish["kind"] in ("error", "aborted"):
            raise DshError(finish.get("message") or f"summarisation ended {finish['kind']}", finish.get("code"))
        text = "".join(b["text"] for b in result.message["content"] if b["type"] == "text").strip()
    if signal is not None and signal.aborted:
        raise AbortedError(signal.reason or "aborted")
    if not text:
        raise DshError("the summarising model returned no text", "EMPTY_SUMMARY")
    return text


def compaction_data(
    plan: CompactionPlan,
    summary: str,
    *,
    trigger: str,
    model: str,
    tokens_before: int | None,
    tokens_after: int,
    window: int | None,
    instructions: str | None,
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "summary": summary,
        "upto": plan.upto,
        "trigger": trigger,
        "model": model,
        "tokens_after": tokens_after,
    }
    if tokens_before is not None:
        data["tokens_before"] = tokens_before
    if window is not None:
        data["window"] = window
    if instructions:
        data["instructions"] = instructions
    if plan.keep:
        data["keep"] = list(plan.keep)
    json.dumps(data)  # plain JSON only
    return data


EVENT = COMPACTION_EVENT
