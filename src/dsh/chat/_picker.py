"""The chat's pickers (model, mode, the session to resume): a short list drawn under the prompt, chosen with keys.

Keys: ``1`` to ``9`` choose that entry at once; ↑/↓ (or Ctrl+P/Ctrl+N) move and Enter chooses; Esc or Ctrl+C close
the picker and choose nothing. Any other key the user types means they were typing a prompt, not picking: with
``typing="close"`` the picker closes and hands the key back (:attr:`Picked.typed`) so it starts the next prompt,
and nothing is chosen; with ``typing="refuse"`` (a picker that must be answered first, like ``--resume``'s) the
key is refused visibly (a line under the list says which keys work) and nothing changes. Enter never chooses
anything the user did not see highlighted, and a key never both chooses and goes to the prompt.

Guarantees: at most :data:`ROWS` entries are drawn at a time, with ``↑ N more`` / ``↓ N more`` lines saying what is
out of view; the picker draws nothing once it closes but the line it leaves (the message and the choice).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["ROWS", "Picked", "pick"]

ROWS = 10


@dataclass
class _Cursor:
    at: int
    refused: str = ""
    """The last key refused (shown until the cursor moves)."""


@dataclass(frozen=True)
class Picked:
    """What a picker ended with: the *value* chosen, or None; *typed* is the key that closed it (it starts the
    next prompt), empty when it closed any other way."""

    value: str | None
    typed: str = ""


async def pick(
    message: str,
    options: Sequence[tuple[str, str]],
    *,
    default: str | None = None,
    typing: Literal["close", "refuse"] = "close",
) -> Picked:
    """Show *options* (``(value, label)``) under *message* and wait for a choice (see the module's keys)."""
    from prompt_toolkit.application import Application
    from prompt_toolkit.formatted_text import StyleAndTextTuples
    from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
    from prompt_toolkit.keys import Keys
    from prompt_toolkit.layout import FormattedTextControl, HSplit, Layout, Window
    from prompt_toolkit.styles import Style

    values = [value for value, _ in options]
    state = _Cursor(values.index(default) if default in values else 0)
    done: list[Picked] = []

    def lines() -> StyleAndTextTuples:
        at = state.at
        top = min(max(0, at - ROWS + 1), max(0, len(options) - ROWS))
        out: StyleAndTextTuples = [("class:message", f"{message}\n")]
        if top:
            out.append(("class:more", f"   ↑ {top} more\n"))
        for index in range(top, min(len(options), top + ROWS)):
            value, label = options[index]
            number = f"{index + 1}." if index < 9 else "  "
            current = value == default
            style = "class:selected" if index == at else ""
            out.append((style, f" {'>' if index == at else ' '} {number} {label}{'  (current)' if current else ''}\n"))
        below = len(options) - top - ROWS
        if below > 0:
            out.append(("class:more", f"   ↓ {below} more\n"))
        hint = "1-9 picks · ↑↓ Enter · Esc closes"
        if state.refused:
            out.append(("class:refused", f"   {state.refused!r} is not a choice here: {hint}"))
        else:
            out.append(("class:more", f"   {hint}" + (" · typing goes to the prompt" if typing == "close" else "")))
        return out

    bindings = KeyBindings()

    def finish(event: KeyPressEvent, result: Picked) -> None:
        done.append(result)
        event.app.exit()

    @bindings.add("up")
    @bindings.add("c-p")
    def _(event: KeyPressEvent) -> None:
        state.at = max(0, state.at - 1)
        state.refused = ""

    @bindings.add("down")
    @bindings.add("c-n")
    def _(event: KeyPressEvent) -> None:
        state.at = min(len(options) - 1, state.at + 1)
        state.refused = ""

    @bindings.add("enter")
    def _(event: KeyPressEvent) -> None:
        finish(event, Picked(values[state.at] if values else None))

    @bindings.add("escape", eager=True)
    @bindings.add("c-c")
    @bindings.add("c-d")
    def _(event: KeyPressEvent) -> None:
        finish(event, Picked(None))

    @bindings.add(Keys.Any)
    def _(event: KeyPressEvent) -> None:
        key = event.data
        if key.isdigit():
            if 1 <= int(key) <= min(9, len(values)):
                finish(event, Picked(values[int(key) - 1]))
            else:
                state.refused = key
        elif typing == "close" and key.isprintable():
            finish(event, Picked(None, typed=key))
        else:
            state.refused = key

    application: Application[None] = Application(
        layout=Layout(HSplit([Window(FormattedTextControl(lines, show_cursor=False), dont_extend_height=True)])),
        key_bindings=bindings,
        style=Style.from_dict(
            {"message": "bold", "selected": "bold ansicyan", "more": "#888888", "refused": "ansired"}
        ),
        full_screen=False,
        erase_when_done=True,
    )
    await application.run_async()
    return done[0] if done else Picked(None)
