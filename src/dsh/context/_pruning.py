"""Pruning: old tool results replaced, in the model's view, by a one-line stub; no model call.

When the next request would pass the compaction threshold, the context plugin first tries this: walking the view
from the newest message back, the tool results within the most recent ``protect`` tokens of tool output stay
verbatim; every older one (not already a stub) becomes a stub naming the tool, its arguments (clipped) and where
the full output lives (the spill file when the result names one, else the session log, event seq). It is worth
doing only when it frees at least ``minimum`` tokens: each prune changes history, which costs the provider's
prompt cache one miss.

The result is recorded as a ``context/prune`` session event ``{results: [{seq, stub}], trigger, tokens_before,
tokens_after}``; :meth:`dsh.services.sessions.Session.derive_messages` applies it live and after a load, so a
reload derives the same messages. The log keeps every output.

Guarantees: a call is never separated from its result (the result message stays, only its content changes, with
the same call id and error flag); nothing is pruned inside the protected window; the stub is always shorter than
what it replaces (otherwise the result is left alone).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from dsh.services.llm import content_chars, estimate_chars

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from dsh.services.llm import Message

__all__ = ["ARGUMENTS_CLIP", "PrunePlan", "plan_prune", "stub_text"]

ARGUMENTS_CLIP = 200
"""Characters of a call's arguments repeated in its stub."""


@dataclass(frozen=True, slots=True)
class PrunePlan:
    results: list[dict[str, Any]]
    """``[{seq, stub}]`` in log order: the ``tool/result`` events whose output the view replaces."""
    saved: int
    """Estimated tokens freed (before calibration)."""


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def stub_text(name: str, arguments: str, chars: int, seq: int, spill: str | None) -> str:
    """The one line a pruned result becomes."""
    where = f"the full output is in {spill}" if spill else f"the session log keeps the full output (event {seq})"
    return (
        f"[output pruned to save context: {name}({_clip(arguments, ARGUMENTS_CLIP)}) returned {chars:,} characters; "
        f"{where}; run the tool again if you need it]"
    )


def _result_block(message: Message) -> dict[str, Any] | None:
    content = message["content"]
    if message["role"] != "user" or len(content) != 1:
        return None
    block = cast(dict[str, Any], content[0])
    return block if block.get("type") == "tool-result" else None


def plan_prune(
    view: Sequence[tuple[int, Message]],
    *,
    protect: int,
    minimum: int,
    pruned: set[int],
    spills: Mapping[int, str],
) -> PrunePlan | None:
    """What to prune in *view* (``(seq, message)`` pairs, oldest first), or None when it would free less than
    *minimum* tokens. *pruned*: seqs already stubbed; *spills*: seq → the file a result's full output went to."""
    calls: dict[str, tuple[str, str]] = {}
    for _, message in view:
        if message["role"] == "assistant":
            for raw in message["content"]:
                block = cast(dict[str, Any], raw)
                if block.get("type") == "tool-call":
                    calls[block["id"]] = (block.get("name") or "?", block.get("arguments") or "")
    protected = 0
    saved = 0
    results: list[dict[str, Any]] = []
    for seq, message in reversed(view):
        result = _result_block(message)
        if result is None:
            continue
        chars = content_chars(result.get("content") or [])
        tokens = estimate_chars(chars)
        if protected < protect:
            protected += tokens
            continue
        if seq in pruned:
            continue
        name, arguments = calls.get(result.get("tool_call_id") or "", ("?", ""))
        try:
            arguments = json.dumps(json.loads(arguments), ensure_ascii=False) if arguments.strip() else ""
        except ValueError:
            pass
        stub = stub_text(name, arguments, chars, seq, spills.get(seq))
        gain = tokens - estimate_chars(len(stub))
        if gain <= 0:
            continue
        results.append({"seq": seq, "stub": stub})
        saved += gain
    if saved < minimum or not results:
        return None
    results.reverse()
    return PrunePlan(results, saved)
