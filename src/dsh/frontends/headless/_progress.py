"""``dsh exec`` without ``--json``: progress for a person on stderr (the answer alone goes to stdout).

On a terminal, one line redrawn in place: a spinner and what the agent is doing (thinking, or the tool it runs);
it is cleared before anything else is written. Elsewhere (a CI log, a file), one plain line per tool call and per
failed call, so the log reads top to bottom.
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

import anyio

__all__ = ["Progress", "describe_call"]

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
TICK = 0.1
WIDTH = 100


def describe_call(name: str, arguments: str) -> str:
    """``run_command: make test``: the tool and its main argument (the command, the path, the pattern), on one line,
    its control and invisible characters escaped (:func:`dsh.policy.escape_control`): a terminal never shows a
    command that hides or rewrites part of what runs."""
    from dsh.policy import escape_control

    try:
        parsed: Any = json.loads(arguments)
    except ValueError:
        parsed = None
    detail = ""
    if isinstance(parsed, dict):
        for key in ("command", "path", "pattern", "query", "url"):
            if isinstance(parsed.get(key), str):
                detail = parsed[key]
                break
    line = f"{name}: {detail}" if detail else name
    line = " ".join(escape_control(line).split())
    return line if len(line) <= WIDTH else line[: WIDTH - 1] + "…"


class Progress:
    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream or sys.stderr
        self.live = self._stream.isatty()
        self.doing = "thinking"
        self._frame = 0
        self._shown = False

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):
            pass

    def clear(self) -> None:
        if self._shown:
            self._write("\r\x1b[2K")
            self._shown = False

    def line(self, text: str) -> None:
        """A line that stays (a failure, a refusal, a server that did not start)."""
        self.clear()
        self._write(f"dsh: {text}\n")

    def tool_call(self, name: str, arguments: str) -> None:
        described = describe_call(name, arguments)
        self.doing = described
        if not self.live:
            self._write(f"dsh: {described}\n")

    def tool_result(self, name: str, failed: str | None) -> None:
        self.doing = "thinking"
        if failed is not None:
            self.line(f"{name} failed: {failed}")

    async def spin(self) -> None:
        """Redraw the spinner until cancelled (on a terminal only)."""
        if not self.live:
            return
        try:
            while True:
                self._frame = (self._frame + 1) % len(SPINNER)
                self._write(f"\r\x1b[2K{SPINNER[self._frame]} {self.doing}")
                self._shown = True
                await anyio.sleep(TICK)
        finally:
            self.clear()
