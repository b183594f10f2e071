"""Turn a chunk stream into a message.

Rules: consecutive text deltas form one text block, consecutive reasoning deltas one reasoning block; tool-call
deltas are grouped by ``id`` into tool-call blocks in order of first appearance (the name comes with any
delta); a ``block-end`` is authoritative for the block it closes (it replaces the open block of the same kind,
or is appended when none is open) and closes it; ``usage`` and ``finish`` are recorded, not turned into blocks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from dsh.services.llm._types import ContentBlock, FinishReason, Message, StreamChunk, Usage

__all__ = ["BlockAssembler", "GenerateResult"]


@dataclass(slots=True)
class GenerateResult:
    message: Message
    usage: Usage | None = None
    finish: FinishReason | None = None


class BlockAssembler:
    """Feed chunks in stream order; read :meth:`message` (or :meth:`result`) at any point."""

    __slots__ = ("_blocks", "_open", "_tool_calls", "finish", "usage")

    def __init__(self) -> None:
        self._blocks: list[dict[str, Any]] = []
        self._open: dict[str, Any] | None = None
        self._tool_calls: dict[str, int] = {}
        self.usage: Usage | None = None
        self.finish: FinishReason | None = None

    def feed(self, chunk: StreamChunk) -> None:
        raw: dict[str, Any] = chunk  # type: ignore[assignment]
        kind = raw["type"]
        if kind == "text-delta" or kind == "reasoning-delta":
            block_type = "text" if kind == "text-delta" else "reasoning"
            current = self._open
            if current is not None and current["type"] == block_type:
                current["text"] += raw["text"]
            else:
                self._open = {"type": block_type, "text": raw["text"]}
                self._blocks.append(self._open)
        elif kind == "tool-call-delta":
            index = self._tool_calls.get(raw["id"])
            if index is None:
                self._tool_calls[raw["id"]] = len(self._blocks)
                self._blocks.append(
                    {"type": "tool-call", "id": raw["id"], "name": raw.get("name") or "", "arguments": ""}
                )
                index = len(self._blocks) - 1
            call = self._blocks[index]
            if raw.get("name"):
                call["name"] = raw["name"]
            call["arguments"] += raw["arguments_delta"]
            self._open = None
        elif kind == "block-end":
            self._end_block(dict(raw["block"]))
        elif kind == "usage":
            self.usage = cast(Usage, dict(raw["usage"]))
        elif kind == "finish":
            self.finish = cast(FinishReason, dict(raw["reason"]))

    def _end_block(self, done: dict[str, Any]) -> None:
        if done["type"] == "tool-call":
            index = self._tool_calls.get(done["id"])
            if index is None:
                self._tool_calls[done["id"]] = len(self._blocks)
                self._blocks.append(done)
            else:
                self._blocks[index] = done
        elif self._open is not None and self._open["type"] == done["type"]:
            self._blocks[next(i for i, b in enumerate(self._blocks) if b is self._open)] = done
        else:
            self._blocks.append(done)
        self._open = None

    def message(self) -> Message:
        """The assembled assistant message (fresh block dicts)."""
        return {"role": "assistant", "content": [cast(ContentBlock, dict(b)) for b in self._blocks]}

    def result(self) -> GenerateResult:
        return GenerateResult(self.message(), self.usage, self.finish)
