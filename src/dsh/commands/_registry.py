"""The ``commands`` service: slash commands that any plugin registers and any front end runs.

Guarantees:

* A registration is owned by the calling plugin's scope (disposed with it); adding or removing one emits
  ``commands/change``.
* Names are unique among registered commands; a name is 1-64 characters of ``[A-Za-z0-9_.:-]`` (no ``/``).
* :meth:`CommandRegistry.for_session` is what one session offers: the registered commands, then the user's
  Markdown commands for its directory (project files shadow user files; a registered command is never shadowed),
  then the commands of each source added with :meth:`CommandRegistry.add_source` (skills, ``dsh.skills``) that no
  earlier command shadows. A source that raises offers nothing (one log line); it never hides the others.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from dsh import events as ev
from dsh.kernel import Disposer, current_scope, plugin

if TYPE_CHECKING:
    from dsh.kernel import Context
    from dsh.services.agents import Agent
    from dsh.services.llm import ContentBlock

__all__ = [
    "Command",
    "CommandRegistry",
    "CommandResult",
    "Invocation",
    "SessionControls",
    "commands_plugin",
]

_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,64}")


class SessionControls(Protocol):
    """What a front end lets commands see and change of one session (the ACP front end implements it).

    Switching goes exactly through the front end's own pickers, so a command and a picker never disagree."""

    @property
    def session_id(self) -> str: ...
    @property
    def cwd(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def mode(self) -> str: ...
    def models(self) -> list[tuple[str, str]]:
        """``(id, display name)`` of the models offered."""
        ...

    def modes(self) -> list[tuple[str, str, str]]:
        """``(id, name, description)`` of the modes."""
        ...

    def switch_model(self, model: str) -> None:
        """Raise ``ValueError`` with a message for the user when *model* is not offered."""
        ...

    def switch_mode(self, mode: str) -> None:
        """Raise ``ValueError`` with a message for the user when *mode* is unknown."""
        ...

    def status(self) -> list[tuple[str, str]]:
        """Extra ``(label, value)`` lines for ``/status`` (context in use, the session file, MCP servers)."""
        ...


@dataclass(frozen=True, slots=True)
class Invocation:
    """One run of a command: ``/name args`` typed in *session*."""

    name: str
    args: str
    agent: Agent
    controls: SessionControls
    commands: Sequence[Command]
    """What the session offers (for ``/help``)."""

    @property
    def argv(self) -> list[str]:
        return self.args.split()


@dataclass(frozen=True, slots=True)
class CommandResult:
    """What a command produced: ``text`` to show in the transcript, and/or ``prompt`` to send to the model as the
    user's message of an ordinary turn (``/init``, Markdown commands). ``stop_reason`` answers a text-only
    command's prompt (``end_turn`` unless the command says otherwise)."""

    text: str | None = None
    prompt: list[ContentBlock] | None = None
    stop_reason: str = "end_turn"


Handler = Callable[[Invocation], Awaitable[CommandResult]]


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    description: str
    handler: Handler
    input_hint: str | None = None
    origin: str = "plugin"
    """``plugin`` (registered), ``project`` or ``user`` (a Markdown file)."""
    meta: dict[str, Any] = field(default_factory=dict)


class CommandRegistry:
    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._commands: dict[str, Command] = {}
        self._sources: list[Callable[[str | None], list[Command]]] = []

    def register(self, name: str, description: str, handler: Handler, input_hint: str | None = None) -> Disposer:
        """Add ``/name``; owned by the calling scope."""
        if not _NAME.fullmatch(name):
            raise ValueError(f"invalid command name {name!r}: 1-64 of letters, digits, '_', '.', ':', '-'")
        if name in self._commands:
            raise ValueError(f"command {name!r} is already registered")
        command = Command(name, description, handler, input_hint)
        self._commands[name] = command
        self._changed()

        def remove() -> None:
            if self._commands.get(name) is command:
                del self._commands[name]
                self._changed()

        return (current_scope() or self._ctx.scope).effect(remove)

    def add_source(self, source: Callable[[str | None], list[Command]]) -> Disposer:
        """Offer the commands *source* finds for a session's directory after the registered and Markdown ones
        (a name already offered shadows the source's); owned by the calling scope."""
        self._sources.append(source)
        self._changed()

        def remove() -> None:
            if source in self._sources:
                self._sources.remove(source)
                self._changed()

        return (current_scope() or self._ctx.scope).effect(remove)

    def get(self, name: str) -> Command | None:
        return self._commands.get(name)

    def all(self) -> list[Command]:
        return list(self._commands.values())

    def for_session(self, cwd: str | None) -> list[Command]:
        """The registered commands, then the Markdown commands found for *cwd* that no registered one shadows."""
        from dsh.commands._markdown import markdown_commands

        offered = dict(self._commands)
        for command in markdown_commands(cwd):
            offered.setdefault(command.name, command)
        for source in self._sources:
            try:
                found = source(cwd)
            except Exception as exc:  # a broken source hides only its own commands
                from dsh._log import get_logger

                get_logger("dsh.commands").warning(
                    "a command source failed", error=f"{type(exc).__name__}: {exc}"[:200]
                )
                continue
            for command in found:
                offered.setdefault(command.name, command)
        return list(offered.values())

    def _changed(self) -> None:
        self._ctx.emit(ev.COMMANDS_CHANGE)


@plugin("commands")
def commands_plugin(ctx: Context, config: object) -> None:
    """Provide ``ctx.commands`` (empty: the built-in commands are their own plugin)."""
    ctx.provide("commands", CommandRegistry(ctx))
