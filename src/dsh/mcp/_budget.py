"""The size budget of an MCP tool result: what the model gets of a huge result, and where the rest goes.

A server can answer anything up to the transport's line limit (128 MiB); a 50 MB answer used to become a 52 MB
session line, sent to the model whole. Guarantees of :func:`budget_content`:

* When the result's text (all text blocks together) is at most :data:`RESULT_CHARS` characters, the content is
  returned unchanged (the same list).
* Otherwise the full text is written to a file first (``spill(text)`` returns its path; a failure to write is
  said instead of a path), and the model gets the first :data:`RESULT_CHARS` characters followed by one note:
  how many characters were left out and where the whole result is. Non-text blocks are kept.

This is the MCP package's own budget until the tool pipeline's budget step (issue #21) takes over every tool's
results; it is one function called at one place (:meth:`McpManager.on_execute`), so moving it is one line.
"""

from __future__ import annotations

from collections.abc import Callable

from dsh.services.llm import ContentBlock

__all__ = ["RESULT_CHARS", "budget_content"]

RESULT_CHARS = 30_000
"""The same budget as a command's output: about 7,500 tokens."""


def budget_content(content: list[ContentBlock], spill: Callable[[str], str]) -> list[ContentBlock]:
    """*content* within :data:`RESULT_CHARS` characters of text (see the module docstring)."""
    texts = [str(block.get("text", "")) for block in content if block.get("type") == "text"]
    total = sum(map(len, texts))
    if total <= RESULT_CHARS:
        return content
    whole = "\n".join(texts)
    try:
        where = f"the whole result is in {spill(whole)}"
    except OSError as exc:
        where = f"the whole result could not be saved ({exc.strerror or exc})"
    head = whole[:RESULT_CHARS]
    note = (
        f"\n[result truncated: showing the first {RESULT_CHARS:,} of {total:,} characters; {where}. Read it "
        "with read_file (offset and limit) or search it with grep if you need more.]"
    )
    kept: list[ContentBlock] = [block for block in content if block.get("type") != "text"]
    return [{"type": "text", "text": head + note}, *kept]
