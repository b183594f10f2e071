"""Turn a chunk stream into a message.

Rules: consecutive text deltas form one text block, consecutive reasoning deltas one reasoning block; tool-call
deltas are grouped by ``id`` into tool-call blocks in order of first appearance (the name comes with any
delta); a ``block-end`` is authoritative for the block it closes (it replaces the open block of the same kind,
or is appended when none is open) and closes it; ``usage`` and ``finish`` are recorded, not turned into blocks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dsh.services.llm._types import ContentBlock, FinishReason, Message, StreamChunk, ToolCallBlock, Usage

__all__ = ["BlockAssembler", "GenerateResult"]


@dataclass(slots=True)
class GenerateResult:
    message: Message
    usage: Usage | None = None
    finish: FinishReason | None = None


@dataclass(slots=True)
class BlockAssembler:
    blocks: list[ContentBlock] = field(default_factory=list)
    usage: Usage | None = None
    finish: FinishReason | None = None
    _open: dict[str, Any] | None = None
    _tool_calls: dict[str, ToolCallBlock] = field(default_factory=dict)

    def feed(self, chunk: StreamChunk) -> None:
        kind = chunk["type"]
        if kind == "text-delta" or kind == "reasoning-delta":
            block_type = "text" if kind == "text-delta" else "reasoning"
            current = self._open
            if current is not None and current["type"] == block_type:
                current["text"] += chunk["text"]  # type: ignore[typeddict-item]
            else:
                block: dict[str, Any] = {"type": block_type, "text": chunk["text"]}  # type: ignore[typeddict-item]
                self.blocks.append(block)  # type: ignore[arg-type]
                self._open = block
        elif kind == "tool-call-delta":
            call_id = chunk["id"]  # type: ignore[typeddict-item]
            call = self._tool_calls.get(call_id)
            if call is None:
                call = {"type": "tool-call", "id": call_id, "name": chunk.get("name", ""), "arguments": ""}
                self._tool_calls[call_id] = call
                self.blocks.append(call)
            elif chunk.get("name"):
                call["name"] = chunk["name"]  # type: ignore[typeddict-item]
            call["arguments"] += chunk["arguments_delta"]  # type: ignore[typeddict-item]
            self._open = None
        elif kind == "block-end":
            done: ContentBlock = chunk["block"]  # type: ignore[typeddict-item]
            replaced = False
            if done["type"] == "tool-call":
                existing = self._tool_calls.get(done["id"])
                if existing is not None:
                    index = next(i for i, b in enumerate(self.blocks) if b is existing)
                    self.blocks[index] = dict(done)  # type: ignore[assignment]
                    self._tool_calls[done["id"]] = self.blocks[index]  # type: ignore[assignment]
                    replaced = True
            elif self._open is not None and self._open["type"] == done["type"]:
                index = next(i for i, b in enumerate(self.blocks) if b is self._open)
                self.blocks[index] = dict(done)  # type: ignore[assignment]
                replaced = True
            if not replaced:
                copy_ = dict(done)
                self.blocks.append(copy_)  # type: ignore[arg-type]
                if done["type"] == "tool-call":
                    self._tool_calls[done["id"]] = copy_  # type: ignore[assignment]
            self._open = None
        elif kind == "usage":
            self.usage = dict(chunk["usage"])  # type: ignore[typeddict-item,assignment]
        elif kind == "finish":
            self.finish = dict(chunk["reason"])  # type: ignore[typeddict-item,assignment]

    def message(self) -> Message:
        """The assembled assistant message (a fresh list of the blocks so far)."""
        return {"role": "assistant", "content": [dict(b) for b in self.blocks]}  # type: ignore[misc]

    def result(self) -> GenerateResult:
        return GenerateResult(self.message(), self.usage, self.finish)
