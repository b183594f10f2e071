"""The process that turns a fetched HTML page into Markdown: ``python -m dsh.tools._htmlworker SOFT MEMORY``.

Arguments: the soft deadline (seconds), the memory cap (MiB), the largest page converted to Markdown
(characters; a larger one gets its plain text straight away). ``fetch_url`` runs it through :func:`dsh.tools._offload.run_worker` (killed at a hard deadline; cancelling the
call kills it at once), so no page, however large, deep or hostile, can hold the daemon: the conversion never
runs in the daemon's process.

Guarantees: it runs at a lower priority (``nice`` 10) than the daemon; the page (UTF-8) is read from stdin; one JSON object ``{"text": …, "note": …}`` is written to
stdout. The Markdown conversion (:func:`dsh.tools._fetch.html_to_markdown`) gets *SOFT* seconds (an interval
timer) and the process *MEMORY* MiB of address space (``RLIMIT_AS``); when it runs out of either, or the page is
nested too deeply for it (``RecursionError``), the page's plain text is returned instead (one linear pass over its
tags; also at once for a page over the size given: scripts and styles dropped, a line break per block element) and ``note`` says
why. A page that fails even that exits non-zero with one line on stderr.
"""

from __future__ import annotations

import html
import json
import os
import re
import resource
import signal
import sys

__all__ = ["plain_text"]

_SKIP = {"script", "style", "noscript", "template", "svg", "iframe", "head"}
_BLOCK = {
    "p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "section", "article", "table",
    "ul", "ol", "blockquote", "header", "footer", "main", "dd", "dt", "hr", "title",
}  # fmt: skip


class _Soft(Exception):
    """The soft deadline passed."""


class _Large(Exception):
    """The page is over the size converted to Markdown."""


_TAG = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9]*)\b[^>]*>|<!--.*?-->|<![^>]*>|<\?[^>]*>", re.S)


def plain_text(page: str) -> str:
    """The text of *page*: one pass over its tags with a regular expression (no tree, no recursion: linear in
    the page), scripts and styles dropped, a line break per block element, entities decoded, blank-line runs
    collapsed."""
    parts: list[str] = []
    position = 0
    skipping: str | None = None
    for match in _TAG.finditer(page):
        if skipping is None:
            parts.append(page[position : match.start()])
        position = match.end()
        name = (match.group(2) or "").lower()
        if not name:
            continue
        closing = match.group(1) == "/"
        if skipping is not None:
            if closing and name == skipping:
                skipping = None
            continue
        if name in _SKIP and not closing:
            skipping = name
        elif name in _BLOCK:
            parts.append("\n")
    if skipping is None:
        parts.append(page[position:])
    lines = [" ".join(line.split()) for line in html.unescape("".join(parts)).splitlines()]
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
    largest = int(sys.argv[3]) if len(sys.argv) > 3 else 1 << 20
    os.nice(10)  # the daemon's loop comes first when cores are scarce
    page = sys.stdin.buffer.read().decode("utf-8", "replace")
    limit = memory * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    note = ""
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, soft)
    try:
        if len(page) > largest:
            raise _Large
        from dsh.tools._fetch import html_to_markdown

        text = html_to_markdown(page)
    except _Large:
        note = f"the page is over {largest >> 20} MB, too large to convert to Markdown in time"
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
        text = plain_text(page)
    sys.stdout.write(json.dumps({"text": text, "note": note}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
