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
    """Feed chunks in stream order; read :meth:`message` (or :meth:`result`) at any point.

    Text is collected as a list of pieces and joined when read, so a message of *n* deltas costs O(n), not
    the O(n²) of repeated string concatenation (this sits on the chunk path).
    """

    __slots__ = ("_args", "_blocks", "_open", "_open_parts", "_tool_calls", "finish", "usage")

    def __init__(self) -> None:
        self._blocks: list[dict[str, Any]] = []
        self._open: dict[str, Any] | None = None
        self._open_parts: list[str] = []
        self._tool_calls: dict[str, int] = {}
        self._args: dict[int, list[str]] = {}
        self.usage: Usage | None = None
        self.finish: FinishReason | None = None

    def _close_open(self) -> None:
        if self._open is not None:
            self._open["text"] = "".join(self._open_parts)
            self._open = None
            self._open_parts = []

    def feed(self, chunk: StreamChunk) -> None:
        raw: dict[str, Any] = chunk  # type: ignore[assignment]
        kind = raw["type"]
        if kind == "text-delta" or kind == "reasoning-delta":
            block_type = "text" if kind == "text-delta" else "reasoning"
            current = self._open
            if current is not None and current["type"] == block_type:
                self._open_parts.append(raw["text"])
            else:
                self._close_open()
                self._open = {"type": block_type, "text": ""}
                self._open_parts = [raw["text"]]
                self._blocks.append(self._open)
        elif kind == "tool-call-delta":
            self._close_open()
            index = self._tool_calls.get(raw["id"])
            if index is None:
                index = len(self._blocks)
                self._tool_calls[raw["id"]] = index
                self._blocks.append(
                    {"type": "tool-call", "id": raw["id"], "name": raw.get("name") or "", "arguments": ""}
                )
                self._args[index] = []
            if raw.get("name"):
                self._blocks[index]["name"] = raw["name"]
            self._args[index].append(raw["arguments_delta"])
        elif kind == "block-end":
            self._end_block(dict(raw["block"]))
        elif kind == "usage":
            self.usage = cast(Usage, dict(raw["usage"]))
        elif kind == "finish":
            self.finish = cast(FinishReason, dict(raw["reason"]))

    def _end_block(self, done: dict[str, Any]) -> None:
        if done["type"] == "tool-call":
            self._close_open()
            index = self._tool_calls.get(done["id"])
            if index is None:
                self._tool_calls[done["id"]] = len(self._blocks)
                self._blocks.append(done)
            else:
                self._blocks[index] = done
                self._args.pop(index, None)
        elif self._open is not None and self._open["type"] == done["type"]:
            index = next(i for i, b in enumerate(self._blocks) if b is self._open)
            self._open = None
            self._open_parts = []
            self._blocks[index] = done
        else:
            self._close_open()
            self._blocks.append(done)

    def message(self) -> Message:
        """The assembled assistant message (fresh block dicts)."""
        if self._open is not None:
            self._open["text"] = "".join(self._open_parts)
        for index, parts in self._args.items():
            self._blocks[index]["arguments"] = "".join(parts)
        return {"role": "assistant", "content": [cast(ContentBlock, dict(b)) for b in self._blocks]}

    def result(self) -> GenerateResult:
        return GenerateResult(self.message(), self.usage, self.finish)
