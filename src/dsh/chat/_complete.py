"""Completion at the prompt: ``/`` commands (the agent's ``available_commands_update`` and the chat's own) and
``@path`` (files and directories below the working directory).

Guarantees: commands complete only as the first word of the input; a path completes the ``@`` word the cursor
is in, never reads outside what the user typed (``@../x`` lists ``..`` because the user typed it), lists at most
:data:`MAX_PATHS` entries, hides dot-files unless the typed name starts with a dot, and never raises (a
directory that cannot be read completes nothing).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

from dsh.chat._commands import all_commands
from dsh.chat._sanitize import sanitize
from dsh.chat._state import SessionState

__all__ = ["MAX_PATHS", "ChatCompleter"]

MAX_PATHS = 200
SKIPPED = {".git", "node_modules", "__pycache__", ".venv"}


class ChatCompleter(Completer):
    def __init__(self, state: Callable[[], SessionState], cwd: str) -> None:
        self._state = state
        self._cwd = cwd

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterator[Completion]:
        text = document.text_before_cursor
        if text.startswith("/") and not any(c.isspace() for c in text):
            typed = text[1:]
            for name, description, hint in all_commands(self._state()):
                if name.startswith(typed):
                    meta = sanitize(description + (f"  {hint}" if hint else ""), one_line=True)
                    shown = "/" + sanitize(name, one_line=True)
                    yield Completion("/" + name, start_position=-len(text), display=shown, display_meta=meta)
            return
        word = text.split()[-1] if text and not text[-1].isspace() else ""
        if word.startswith("@"):
            yield from self._paths(word)

    def _paths(self, word: str) -> Iterator[Completion]:
        typed = word[1:]
        folder, _, prefix = typed.rpartition("/")
        base = os.path.join(self._cwd, os.path.expanduser(folder)) if folder else self._cwd
        if typed.startswith("/"):
            base = folder or "/"
        try:
            with os.scandir(base) as entries:
                names = sorted(
                    (entry.name + ("/" if entry.is_dir() else ""))
                    for entry in entries
                    if entry.name.startswith(prefix)
                    and entry.name not in SKIPPED
                    and (prefix.startswith(".") or not entry.name.startswith("."))
                )
        except OSError:
            return
        for name in names[:MAX_PATHS]:
            full = f"{folder}/{name}" if folder or typed.startswith("/") else name
            yield Completion("@" + full, start_position=-len(word), display=name)
