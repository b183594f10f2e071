"""The budget stage: the one place where a tool result's size for the model is bounded.

Guarantees: a result whose text blocks together exceed the limit (characters) keeps its head and its tail
(two thirds and one third of the limit) with a line in between that says how much was cut; other blocks
(images) are kept as they are; ``display`` (for people, never sent to the model) is untouched. The limit is the
tool's ``meta["output_limit"]`` when it sets one, else :data:`OUTPUT_LIMIT`. Tools keep their own finer limits
(lines read, matches, a command's bytes): this stage is the ceiling that no tool, MCP ones included, passes.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dsh.services.llm import ContentBlock
    from dsh.services.tools import ToolDefinition, ToolResult

__all__ = ["OUTPUT_LIMIT", "budget", "limit_of"]

OUTPUT_LIMIT = 100_000
"""Characters of text per tool result: today's largest per-tool limit (``read_file``'s 100,000 characters)."""


def limit_of(tool: ToolDefinition | None, default: int = OUTPUT_LIMIT) -> int:
    value: Any = tool.meta.get("output_limit") if tool is not None else None
    return value if isinstance(value, int) and value > 0 else default


def budget(result: ToolResult, limit: int = OUTPUT_LIMIT) -> ToolResult:
    """*result* with its text cut to *limit* characters (see the module docstring)."""
    texts = [block for block in result.content if block.get("type") == "text"]
    total = sum(len(str(block.get("text", ""))) for block in texts)
    if total <= limit:
        return result
    joined = "\n".join(str(block.get("text", "")) for block in texts)
    head, tail = joined[: limit * 2 // 3], joined[len(joined) - limit // 3 :]
    cut = len(joined) - len(head) - len(tail)
    text = f"{head}\n[… {cut} characters cut: the output is longer than {limit}; narrow the call to see the middle]\n{tail}"
    content: list[ContentBlock] = [block for block in result.content if block.get("type") != "text"]
    content.insert(0, {"type": "text", "text": text})
    return dataclasses.replace(result, content=content)
