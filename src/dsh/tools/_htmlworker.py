"""The process that turns a fetched HTML page into Markdown: ``python -m dsh.tools._htmlworker SOFT MEMORY``.

``fetch_url`` runs it through :func:`dsh.tools._offload.run_worker` (killed at a hard deadline; cancelling the
call kills it at once), so no page, however large, deep or hostile, can hold the daemon: the conversion never
runs in the daemon's process.

Guarantees: it runs at a lower priority (``nice`` 10) than the daemon; the page (UTF-8) is read from stdin; one JSON object ``{"text": …, "note": …}`` is written to
stdout. The Markdown conversion (:func:`dsh.tools._fetch.html_to_markdown`) gets *SOFT* seconds (an interval
timer) and the process *MEMORY* MiB of address space (``RLIMIT_AS``); when it runs out of either, or the page is
nested too deeply for it (``RecursionError``), the page's plain text is returned instead (a linear pass of the
standard library's ``HTMLParser``: scripts and styles dropped, a line break per block element) and ``note`` says
why. A page that fails even that exits non-zero with one line on stderr.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
from html.parser import HTMLParser
from typing import Any

__all__ = ["plain_text"]

_SKIP = {"script", "style", "noscript", "template", "svg", "iframe", "head"}
_BLOCK = {
    "p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "section", "article", "table",
    "ul", "ol", "blockquote", "header", "footer", "main", "dd", "dt", "hr", "title",
}  # fmt: skip


class _Soft(Exception):
    """The soft deadline passed."""


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag in _SKIP:
            self.skipping += 1
        elif tag in _BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP:
            self.skipping = max(0, self.skipping - 1)
        elif tag in _BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.skipping:
            self.parts.append(data)


def plain_text(html: str) -> str:
    """The text of *html*: one linear pass, no tree, no recursion; blank-line runs collapsed."""
    parser = _Text()
    parser.feed(html)
    parser.close()
    lines = [" ".join(line.split()) for line in "".join(parser.parts).splitlines()]
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip()


def _alarm(signum: int, frame: object) -> None:
    raise _Soft


def main() -> int:
    soft = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    memory = int(sys.argv[2]) if len(sys.argv) > 2 else 1536
    os.nice(10)  # the daemon's loop comes first when cores are scarce
    html = sys.stdin.buffer.read().decode("utf-8", "replace")
    limit = memory * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    note = ""
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, soft)
    try:
        from dsh.tools._fetch import html_to_markdown

        text = html_to_markdown(html)
    except _Soft:
        note = f"converting it to Markdown took over {soft:.0f} s"
    except MemoryError:
        note = f"converting it to Markdown needed over {memory} MiB"
    except RecursionError:
        note = "it is nested too deeply to convert to Markdown"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    if note:
        text = ""  # free the partial work before the fallback
        text = plain_text(html)
    sys.stdout.write(json.dumps({"text": text, "note": note}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
