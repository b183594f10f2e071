"""The record of one ACP session, public within the front end's package: the desks (commands, gate, MCP,
pickers, questions, delegation) read and change sessions through it and through ``_ports.FrontendPort``, never
through the front end's own module, so the package has no import circle (a test walks the imports).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from dsh.choices import SessionChoices
from dsh.frontends.acp._projection import Presenter, update_frame_prefix
from dsh.frontends.acp._rpc import RpcError
from dsh.policy import SessionPolicy

if TYPE_CHECKING:
    from dsh.services.agents import AgentHandle

__all__ = ["AcpSession", "PendingPrompt", "PendingSteer"]


@dataclass(eq=False)
class PendingPrompt:
    """A ``session/prompt`` waiting for its answer (settled exactly once)."""

    message_id: str
    turn: int | None = None
    cancelled: bool = False
    settled: bool = False
    done: anyio.Event = field(default_factory=anyio.Event)
    outcome: dict[str, Any] | RpcError | None = None


@dataclass(eq=False)
class PendingSteer:
    """A ``_dsh/session/steer`` request waiting for its answer (settled exactly once; :mod:`._steer`)."""

    message_id: str
    prompt: list[dict[str, Any]]
    done: anyio.Event = field(default_factory=anyio.Event)
    outcome: dict[str, Any] | None = None

    def settle(self, outcome: dict[str, Any]) -> None:
        if self.outcome is None:
            self.outcome = outcome
            self.done.set()


@dataclass(eq=False)
class AcpSession:
    """One ACP session of this front end: what the desks (commands, pickers, MCP, questions) read and change."""

    id: str
    cwd: str
    handle: AgentHandle
    mcp_servers: list[dict[str, Any]]
    choices: SessionChoices
    """The session's model, reasoning effort and mode: the core's own object (``ctx.choices``), which the pickers
    render and switch; its ``policy`` is the policy service's (``ctx.policy.session(id)``)."""
    prompts: list[PendingPrompt] = field(default_factory=list)
    by_message: dict[str, PendingPrompt] = field(default_factory=dict)
    open_calls: dict[str, None] = field(default_factory=dict)
    steers: dict[str, PendingSteer] = field(default_factory=dict)
    """``_dsh/session/steer`` requests waiting for their text to be taken, by message id (:mod:`._steer`)."""
    current_turn: int | None = None
    turn_open: bool = False
    titled: bool = False
    title: str | None = None
    """The title the client set (``session/set_title``), None when it never did."""
    turn_usage: dict[str, int] = field(default_factory=dict)
    """The current turn's token totals (``PromptResponse.usage``)."""
    budget_stop: dict[str, Any] | None = None
    """The ``spend/stop`` of the open turn (a budget stopped it: the prompt's answer says so)."""
    present: Presenter | None = None
    names: dict[str, str] | None = None
    """The open calls' catalogue names, when the client gets ``ToolCall.name`` (the projection keeps it)."""
    """How this session's tool calls show themselves (tool cards); set when the record is made."""
    cancelled_at: int = -1
    """Arrival number of the last ``session/cancel``: a prompt that arrived before it is cancelled too,
    even if its handler runs after the cancel's."""
    cancelling: int = 0
    """Generation of the pending cancel (0: none); the watchdog only acts on its own generation."""
    roots: list[str] = field(default_factory=list)
    """The session's ``additionalDirectories`` (roots besides the cwd, :mod:`._roots`)."""
    remove_roots: Callable[[], None] = lambda: None
    frame_prefix: bytes = b""
    """The constant start of this session's ``session/update`` frames (the chunk path's template)."""

    def __post_init__(self) -> None:
        self.frame_prefix = update_frame_prefix(self.id)

    @property
    def model(self) -> str:
        """The model this session's next step uses."""
        return self.choices.model

    @property
    def thought_level(self) -> str | None:
        return self.choices.thought_level

    @property
    def policy(self) -> SessionPolicy:
        """The session's mode and rules (the policy service's)."""
        return self.choices.policy
