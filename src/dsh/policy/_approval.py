"""The ``user/approve`` seam: how the pipeline asks the user whether a prepared call may run.

A front end that can ask listens on ``user/approve`` (``ctx.on(events.USER_APPROVE, listener)``, ``listener(approval,
next)``) for the sessions it owns and passes others down the chain; the ACP front end renders an
:class:`Approval` as ``session/request_permission``. The innermost default answers "nobody to ask": a call that
would ask is then refused with a reason the model can act on (that is how ``dsh prompt`` is gated).

Any package may ask the same way through :func:`approve` (a sub-agent, a checkpoint restore): build an
:class:`Approval` with the options it offers and act on ``Verdict.choice``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dsh import events as ev

if TYPE_CHECKING:
    from dsh.kernel import CancelToken, Context
    from dsh.services.tools import ToolCard

__all__ = [
    "ALLOW_ALWAYS",
    "ALLOW_ONCE",
    "Approval",
    "ApprovalOption",
    "REJECT_ALWAYS",
    "REJECT_ONCE",
    "Verdict",
    "approve",
]

ALLOW_ONCE = "allow_once"
ALLOW_ALWAYS = "allow_always"
REJECT_ONCE = "reject_once"
REJECT_ALWAYS = "reject_always"


@dataclass(frozen=True, slots=True)
class ApprovalOption:
    """One answer the user may give: ``id`` is also its ACP ``PermissionOptionKind`` (allow_once, allow_always,
    reject_once, reject_always); ``label`` names the scope an "always" answer records (``Always allow `npm
    test```)."""

    id: str
    label: str


@dataclass(frozen=True, slots=True)
class Approval:
    """A question "may this call run?", with everything prepare computed, so the user approves what will happen.

    ``card``: how the call presents itself (title, kind, locations); ``diff``: ``(absolute path, old text or None,
    new text)`` of a file change; ``command``: the shell command; ``locations``: the absolute paths it touches;
    ``reason``: why the user is asked (a short phrase, e.g. "edits ask first in default mode")."""

    session_id: str
    call_id: str
    tool: str
    kind: str
    arguments: Any
    options: tuple[ApprovalOption, ...]
    card: ToolCard | None = None
    diff: tuple[str, str | None, str] | None = None
    command: str | None = None
    locations: tuple[str, ...] = ()
    reason: str = ""
    signal: CancelToken | None = None


@dataclass(frozen=True, slots=True)
class Verdict:
    """``choice``: the id of the option the user picked; None when there is no answer, ``reason`` saying why
    (``cancelled``: the request was withdrawn or dismissed; ``unattended``: nobody can be asked)."""

    choice: str | None = None
    reason: str | None = None


async def _nobody(approval: Approval) -> Verdict:
    return Verdict(reason="unattended")


async def approve(ctx: Context, approval: Approval) -> Verdict:
    """Ask through ``user/approve``; without a listener that takes the session: ``Verdict(reason="unattended")``."""
    verdict: Verdict = await ctx.waterfall(ev.USER_APPROVE, approval, default=_nobody)
    return verdict
