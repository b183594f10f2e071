"""Streaming Markdown into a terminal's scrollback: lines that can no longer change are printed once, the
last few stay in the live region and are redrawn as text arrives.

Guarantees: the text is rendered as Markdown (rich) at the console's width every time it grows, a single newline
kept as a line break (as the editors' agent panels do: models write file lists, status lines and commands one per
line; code blocks, lists and tables render as Markdown has them, and a reply of N lines shows N lines); every line but
the last :data:`LIVE_LINES` is committed (printed above the live region, never printed twice); :meth:`finish`
commits the rest. A Markdown construct that reflows earlier lines after they were committed (a table whose
width changes, say) keeps its committed lines: the scrollback is never rewritten. Re-rendering costs one
Markdown parse of the whole message per refresh, bounded by the view's refresh rate, not by chunks.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.segment import Segment
from rich.text import Text

__all__ = ["LIVE_LINES", "Lines", "MarkdownStream", "keep_line_breaks"]

LIVE_LINES = 6


def keep_line_breaks(tokens: Iterable[Any]) -> None:
    """Make every soft line break of parsed Markdown (markdown-it tokens) a hard one, in place: CommonMark joins
    a paragraph's lines with a space, which turns a model's one-per-line list into one long line. Only inline
    content has soft breaks, so code blocks, tables and list structure are untouched."""
    for token in tokens:
        for child in token.children or ():
            if child.type == "softbreak":
                child.type = "hardbreak"


class Lines:
    """Rendered lines (lists of segments) as a renderable."""

    def __init__(self, lines: Iterable[list[Segment]]) -> None:
        self.lines = list(lines)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in self.lines:
            yield from line
            yield Segment.line()


class MarkdownStream:
    def __init__(self, console: Console, *, style: str = "", markdown: bool = True) -> None:
        self.console = console
        self.text = ""
        self.style = style
        self.markdown = markdown
        self.committed = 0
        self._lines: list[list[Segment]] = []
        self._stale = False

    def add(self, text: str) -> None:
        self.text += text
        self._stale = True

    def _render(self) -> list[list[Segment]]:
        if self._stale:
            from rich.markdown import Markdown  # markdown-it and its parsers: paid at the first reply, not at start-up

            source = self.text.rstrip("\n")
            renderable: RenderableType
            if self.markdown:
                renderable = Markdown(source, style=self.style)
                keep_line_breaks(renderable.parsed)
            else:
                renderable = Text(source, style=self.style)
            options = self.console.options.update(width=max(20, self.console.width - 1))
            self._lines = self.console.render_lines(renderable, options, pad=False)
            while self._lines and not "".join(s.text for s in self._lines[-1]).strip():
                self._lines.pop()
            self._stale = False
        return self._lines

    def commit(self, *, final: bool = False) -> None:
        """Print what can no longer change (everything, when *final*)."""
        lines = self._render()
        upto = len(lines) if final else max(self.committed, len(lines) - LIVE_LINES)
        if upto > self.committed:
            self.console.print(Lines(lines[self.committed : upto]), end="")
            self.committed = upto

    def live(self) -> Lines:
        """The lines not yet committed, for the live region."""
        return Lines(self._render()[self.committed :])

    def finish(self) -> None:
        self.commit(final=True)
