"""What the terminal view draws of a session: the scrollback and, during a turn, the live region below it.

It turns ``session/update`` notifications into output: replies streamed as Markdown (:mod:`dsh.chat._stream`),
thoughts dimmed while they stream and then collapsed to one line (or shown whole, ``show_thoughts``), tool cards
that stay in the live region while they run and are printed once when they end, the plan while it changes,
a permission question. Input, prompts and keys are :mod:`dsh.chat._tty`'s; nothing here reads a key or talks
to the agent.

Guarantees: everything printed into the scrollback is printed once (a card when its call ends, a reply's
lines when they can no longer change, the plan when the turn ends); when a live region ends, nothing that was
only in it is lost (the rest of the reply, cards of calls that never ended, a changed plan are printed).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.text import Text

from dsh.chat._render import permission_question, plan_view, tool_card
from dsh.chat._sanitize import sanitize
from dsh.chat._state import SessionState
from dsh.chat._stream import MarkdownStream
from dsh.chat._terminals import Terminal

__all__ = ["FRAME", "PROMPT_MARK", "Transcript"]

FRAME = 0.08
PROMPT_MARK = "\u276f "  # HEAVY RIGHT-POINTING ANGLE QUOTATION MARK ORNAMENT: the prompt, and user turns in a replay
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
FINAL = ("completed", "failed")
TEXT_UPDATES = {"agent_message_chunk": "message", "agent_thought_chunk": "thought", "user_message_chunk": "user"}


def turn_end(update: dict[str, Any]) -> str | None:
    """How a replayed turn ended, when the agent says it did not end normally: dsh marks a cancelled or
    interrupted turn of a ``session/load`` replay with ``_meta.dsh.turnEnd`` on a ``session_info_update``."""
    meta = update.get("_meta")
    dsh = meta.get("dsh") if isinstance(meta, dict) else None
    ended = dsh.get("turnEnd") if isinstance(dsh, dict) else None
    return ended if isinstance(ended, str) and ended else None


class Transcript:
    def __init__(self, console: Console, state: Callable[[], SessionState], cwd: str) -> None:
        self.console = console
        self._state = state
        self._cwd = cwd
        self.show_thoughts = False
        self.thoughts: list[str] = []
        """The thoughts of the current (or last) turn, for ``/thoughts``."""
        self.cancelling = False
        self.typing: str | None = None
        """What the user is typing during a turn (a steer or a queued prompt; None: nothing), drawn in the live
        region above the status line."""
        self._live: Live | None = None
        self._segment: MarkdownStream | None = None
        self._segment_kind: str | None = None
        self._message_id: Any = None
        self._calls: dict[str, dict[str, Any]] = {}
        self._terminal_text: dict[str, str] = {}
        self._plan_changed = False
        self._question: Text | None = None
        self._asked: set[str] = set()
        """Tool calls whose card (with its diff) was printed with a permission question: not drawn again in the
        live region, and their final card leaves the diff out."""

    def begin_turn(self) -> None:
        self.thoughts = []
        self._asked.clear()
        self.cancelling = False

    # -- updates ----------------------------------------------------------------------------------------------

    def on_update(self, update: dict[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        if kind in TEXT_UPDATES:
            self._text(TEXT_UPDATES[str(kind)], update)
        elif kind in ("tool_call", "tool_call_update"):
            self._tool(update)
        elif kind == "plan":
            self._plan_changed = True
        elif kind == "session_info_update":
            ended = turn_end(update)
            if ended is not None:  # a replayed turn that did not end normally (dsh says so on session/load)
                self.end_segment()
                self.console.print(Text(f"({ended})", style="yellow"))

    def on_terminal(self, terminal: Terminal) -> None:
        status = terminal.exit_status()
        end = ""
        if status is not None:
            how = f"killed by {status['signal']}" if "signal" in status else f"exit code: {status['exitCode']}"
            end = f"\n[{how}]"
        self._terminal_text[terminal.terminal_id] = sanitize(terminal.text()).rstrip("\n") + end

    def _text(self, kind: str, update: dict[str, Any]) -> None:
        content = update.get("content")
        if not isinstance(content, dict):
            return
        if content.get("type") == "text":
            text = str(content.get("text", ""))
        elif content.get("type") == "resource":
            raw = content.get("resource")
            resource: dict[str, Any] = raw if isinstance(raw, dict) else {}
            text = f"\n[attached {resource.get('uri')}]\n" if kind == "user" else ""
        elif content.get("type") == "resource_link":
            text = f"\n[linked {content.get('uri')}]\n" if kind == "user" else ""
        else:
            text = f"[{content.get('type')}]"
        message_id = update.get("messageId")
        new_message = kind == "user" and message_id is not None and message_id != self._message_id
        if self._segment is None or kind != self._segment_kind or new_message:
            self.end_segment()
            self._segment_kind = kind
            self._message_id = message_id
            if kind == "user":
                self._segment = MarkdownStream(self.console, style="bold cyan", markdown=False)
                self._segment.add(PROMPT_MARK)
            elif kind == "thought":
                self._segment = MarkdownStream(self.console, style="dim italic", markdown=False)
            else:
                self._segment = MarkdownStream(self.console)
        self._segment.add(text)
        if self._live is None:
            self._segment.commit()

    def note(self, text: Text) -> None:
        """Print *text* into the scrollback now, after what was streamed so far (the stream goes on below it)."""
        self.end_segment()
        self.console.print(text)

    def end_segment(self) -> None:
        """Print the rest of the text being streamed (a thought: its one-line summary, unless shown)."""
        segment, kind = self._segment, self._segment_kind
        self._segment = self._segment_kind = None
        if segment is None:
            return
        if kind == "thought":
            self.thoughts.append(segment.text)
            if not self.show_thoughts:
                words = len(segment.text.split())
                self.console.print(Text(f"✻ Thought ({words} words; /thoughts shows them)", style="dim italic"))
                return
        segment.finish()

    def _tool(self, update: dict[str, Any]) -> None:
        self.end_segment()
        call_id = str(update.get("toolCallId"))
        call = self._calls.setdefault(call_id, {})
        call.update({k: v for k, v in update.items() if k != "sessionUpdate" and v is not None})
        if call.get("status") in FINAL:
            self.console.print(self._card(call))
            del self._calls[call_id]

    def _card(self, call: dict[str, Any]) -> RenderableType:
        asked = str(call.get("toolCallId")) in self._asked
        return tool_card(call, self._terminal_text, show_diff=not asked, cwd=self._cwd)

    # -- permission questions ---------------------------------------------------------------------------------

    def ask(self, tool_call: dict[str, Any], options: list[dict[str, Any]]) -> None:
        """Print the call's card (its diff or command) and show the question in the live region."""
        self.end_segment()
        call_id = str(tool_call.get("toolCallId"))
        card = {**self._calls.get(call_id, {}), **tool_call}
        self.console.print(tool_card(card, self._terminal_text, show_output=False, cwd=self._cwd))
        self._asked.add(call_id)
        self._question = permission_question(options)
        self.refresh()

    def answered(self, name: str) -> None:
        self._question = None
        self.console.print(Text(f"  → {name}", style="dim"))
        self.refresh()

    # -- the live region --------------------------------------------------------------------------------------

    def live_region(self, task_group: TaskGroup) -> _LiveRegion:
        """The live region for the length of a turn (or a load's replay); its frames run in *task_group*."""
        return _LiveRegion(self, task_group)

    def _view(self) -> RenderableType:
        state = self._state()
        parts: list[RenderableType] = []
        if self._segment is not None:
            parts.append(self._segment.live())
        parts += [self._card(call) for call_id, call in self._calls.items() if call_id not in self._asked]
        if self._plan_changed and state.plan:
            parts.append(plan_view(state.plan))
        if self._question is not None:
            parts.append(self._question)
        frame = SPINNER[int(time.monotonic() / FRAME) % len(SPINNER)]
        if self.typing is not None:
            parts.append(Text.assemble(("\u21b3 ", "bold cyan"), (self.typing, ""), ("\u258f", "dim")))
        if self.cancelling:
            status = Text(f"{frame} cancelling…", style="yellow")
        elif self.typing is not None:
            status = Text(f"{frame} working · Enter steers the turn · Tab queues it · Ctrl+C cancels", style="dim")
        else:
            status = Text(f"{frame} working · type to steer · Ctrl+C cancels", style="dim")
        line = state.status_line()
        if line:
            status.append(f" · {line}", style="dim")
        parts.append(status)
        return Group(*parts)

    def refresh(self) -> None:
        if self._live is None:
            return
        if self._segment is not None:
            self._segment.commit()
        self._live.refresh()


class _LiveRegion:
    """Started on entry and refreshed every frame; on exit everything still in it is printed for good."""

    def __init__(self, transcript: Transcript, task_group: TaskGroup) -> None:
        self.transcript = transcript
        self.task_group = task_group
        self._scope = anyio.CancelScope()

    async def __aenter__(self) -> None:
        t = self.transcript
        t._plan_changed = False
        t._live = Live(console=t.console, auto_refresh=False, transient=True, get_renderable=t._view)
        t._live.start()
        self.task_group.start_soon(self._frames)

    async def _frames(self) -> None:
        with self._scope:
            while True:
                self.transcript.refresh()
                await anyio.sleep(FRAME)  # a frame timer: the spinner moves even when nothing arrives

    async def __aexit__(self, *exc: object) -> None:
        t = self.transcript
        self._scope.cancel()
        t.end_segment()
        for call in t._calls.values():
            t.console.print(t._card(call))
        t._calls.clear()
        plan = t._state().plan
        if t._plan_changed and plan:
            t.console.print(plan_view(plan))
        assert t._live is not None
        t._live.stop()
        t._live = None
