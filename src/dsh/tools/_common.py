"""What every built-in tool module shares: the channel from a tool body to its result (``is_error``,
``display``), argument parsing for cards, how a path is shown, and the shape of a tool's registration.

Guarantees: :func:`finish_call` gives each call its own channel (a context variable) and revokes the call's
grants however the call ended; :func:`report` outside a call does nothing; :func:`parse` never raises (invalid
arguments give None); :func:`card_path` resolves against the cwd (``inside`` relative to the cwd alone: whoever decides
what is outside asks the workspace, whose roots and spill roots belong to one application).
"""

from __future__ import annotations

import contextvars
import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from dsh.services.tools import ToolCard, ToolDefinition, ToolExecution, ToolResult
from dsh.tools._errors import ToolError
from dsh.tools._paths import OutsideGrants, ResolvedPath, is_within, resolve_path
from dsh.tools._placeholders import find_placeholder

if TYPE_CHECKING:
    from dsh.kernel import Next

__all__ = [
    "TITLE_WIDTH",
    "Spec",
    "card_path",
    "changed",
    "dir_and_exists",
    "finish_call",
    "parse",
    "paths_of",
    "refuse_placeholder",
    "report",
    "session_of",
    "shown",
]

TITLE_WIDTH = 80

Spec = tuple[ToolDefinition, str, Callable[[Any, str], ToolCard | None], Callable[[Any, str], "list[ResolvedPath]"]]
"""One tool's registration: ``(definition, kind, presenter, paths)``."""

M = TypeVar("M", bound=BaseModel)


# -- is_error and display: the channel from a tool body to its result ----------------------------------------


@dataclass(slots=True)
class _Outcome:
    is_error: bool = False
    display: dict[str, Any] | None = None


_outcome: contextvars.ContextVar[_Outcome | None] = contextvars.ContextVar("dsh_tool_outcome", default=None)


def report(*, is_error: bool = False, display: dict[str, Any] | None = None) -> None:
    """Mark the running call's result as an error and/or attach ``display`` (a tool body returns only text)."""
    box = _outcome.get()
    if box is None:
        return
    box.is_error = box.is_error or is_error
    if display is not None:
        box.display = display


async def finish_call(
    execution: ToolExecution, next_: Next[ToolExecution, ToolResult], grants: OutsideGrants
) -> ToolResult:
    """The ``apply`` stage (innermost, inside any gate): give the call a channel for ``is_error`` and
    ``display``, apply it to the result, and revoke the call's *grants* once it ended, whatever happened."""
    box = _Outcome()
    token = _outcome.set(box)
    try:
        result = await next_()
    finally:
        _outcome.reset(token)
        grants.revoke(execution)
    if box.is_error or box.display is not None:
        result = dataclasses.replace(
            result,
            is_error=result.is_error or box.is_error,
            display=box.display if box.display is not None else result.display,
        )
    return result


# -- helpers --------------------------------------------------------------------------------------------------


def dir_and_exists(path: str) -> tuple[bool, bool]:
    return os.path.isdir(path), os.path.lexists(path)


def shown(path: str, cwd: str) -> str:
    """*path* as a person reads it in a title: relative to *cwd* when below it, else absolute."""
    cwd = os.path.normpath(cwd)
    if path == cwd:
        return "."
    if is_within(path, cwd):
        return os.path.relpath(path, cwd)
    return path


def parse(model: type[M], arguments: Any) -> M | None:
    try:
        if isinstance(arguments, str | bytes):
            return model.model_validate_json(arguments or "{}")
        return model.model_validate(arguments)
    except ValidationError:
        return None


def changed(path: str) -> ToolError:
    return ToolError(
        f"{path} changed while in use (a symlink appeared in it since it was checked); nothing was read or "
        "written through it. Check the path and try again.",
        "PATH_CHANGED",
    )


def session_of(execution: ToolExecution) -> str:
    agent = execution.agent
    return agent.session.id if agent is not None else ""


def refuse_placeholder(new: str, old: str | None, *, known: str = "", field: str) -> None:
    found = find_placeholder(new, old, known=known)
    if found is not None:
        raise ToolError(
            f"{field} line {found.line} is the omission placeholder {found.text!r} where the file has real code: "
            "writing it would delete that code. Write out the complete text in its place (or make a smaller edit "
            "that leaves the rest alone)",
            "PLACEHOLDER",
        )


# -- presentation (cards) -------------------------------------------------------------------------------------
# Cards are drawn from the arguments alone, never from the files: a replayed session must show the same cards
# as the live one did, and the files have changed since. What only the run knows (the file's old text, the
# line of an edit) comes with the result's ``display``.


def card_path(raw: str, cwd: str) -> ResolvedPath:
    """*raw* against *cwd* (what a card shows; ``inside``: below *cwd*)."""
    return resolve_path(raw, cwd, [cwd])


def paths_of(model: type[BaseModel], *fields: str) -> Callable[[Any, str], list[ResolvedPath]]:
    def paths(arguments: Any, cwd: str) -> list[ResolvedPath]:
        args = parse(model, arguments)
        if args is None:
            return []
        values = [getattr(args, name) for name in fields]
        return [card_path(value, cwd) for value in values if isinstance(value, str)]

    return paths
