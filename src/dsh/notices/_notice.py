"""One typed notice: a session-level condition (a server that failed, a sandbox that is not available, a compaction
that failed, a budget nearly spent) that is not the answer to any tool call.

Guarantees:

* :func:`post_notice` always writes the condition as one structured log line on stderr (what every such condition
  was before the seam existed), then emits ``session/notice`` once; it never raises on behalf of a listener
  (the kernel's emit runs listeners synchronously, each one is the listener's own responsibility).
* A notice is immutable and carries everything a front end needs to render it without asking anyone: the session,
  a severity, a title that stands alone, an optional description, the package that posted it and how a client that
  cannot show notices sees it (``fallback``).
* Notices are not stored in the session's log: they describe the process's state at the time (a server of this
  connection, this machine's sandbox), which a later ``session/load`` re-establishes and reports again itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from dsh import events as ev
from dsh._log import get_logger

if TYPE_CHECKING:
    from dsh.kernel import Context

__all__ = ["Fallback", "Notice", "Severity", "post_notice"]

Severity = Literal["info", "warning", "error"]
Fallback = Literal["log", "message", "card"]
"""What a client without ``session.notices`` gets: ``log`` nothing more than the log line (the default),
``message`` an agent message chunk with the title (and description), ``card`` one failed tool card titled with it
(how MCP server failures were always shown)."""

log = get_logger("dsh.notices")


@dataclass(frozen=True, slots=True)
class Notice:
    """``session_id``: the session the condition belongs to; ``title``: one non-empty line that stands alone;
    ``description``: optional detail or guidance; ``source``: the posting package (``mcp``, ``context``,
    ``sandbox``, ``budgets``, ...); ``key``: a stable id for the fallback card (None: one is made up)."""

    session_id: str
    severity: Severity
    title: str
    description: str | None = None
    source: str = ""
    fallback: Fallback = "log"
    key: str | None = None

    def __post_init__(self) -> None:
        if not self.title.strip():
            raise ValueError("a notice needs a non-empty title")
        if self.severity not in ("info", "warning", "error"):
            raise ValueError(f"unknown notice severity {self.severity!r}")


def post_notice(ctx: Context, notice: Notice) -> None:
    """Log *notice* (warning or error level by its severity) and emit ``session/notice`` with it."""
    fields = {"session_id": notice.session_id, "source": notice.source, "title": notice.title}
    if notice.description:
        fields["description"] = notice.description
    if notice.severity == "error":
        log.error("notice", **fields)
    elif notice.severity == "warning":
        log.warning("notice", **fields)
    else:
        log.info("notice", **fields)
    ctx.emit(ev.SESSION_NOTICE, notice)
