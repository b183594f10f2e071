"""``_dsh/session/steer``: guide the running turn at its next step boundary (issue #38 item 2, RFC 0036).

The request carries ``{sessionId, prompt}`` (the blocks of a ``session/prompt``). While the session's turn runs,
the text goes to the agent's steering FIFO (``agent.steer``) and the request is answered once it is in:

* ``{"outcome": "steered", "turn": N}`` when the turn's log took it (its ``steering/message`` event, i.e. the
  model's next request carries it);
* ``{"outcome": "queued", "turn": N}`` when the turn ended before another step could take it (the loop
  re-queues what is left of the steering FIFO): it opened turn N as a prompt of its own;
* ``{"outcome": "cancelled"}`` when a cancel (``session/cancel``, ``session/close``, shutdown) dropped it before
  any turn took it. Nothing is lost silently: the client gets its text back in this answer's ``prompt`` and
  decides (``dsh chat`` puts it back on the input line).

When no turn runs the request is refused (-32602, ``data.reason = "idle"``): a steer is guidance for work in
progress, and starting a turn without a ``session/prompt`` would leave that turn with no request to answer; the
client sends it as a ``session/prompt`` instead. A plain ``session/prompt`` during a turn still queues.

Every steer request is answered exactly once: each outcome comes from an event the front end already handles
(the steer's log event, a cancel, the agent going idle without having taken it).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from dsh.frontends.acp._rpc import INVALID_PARAMS, RpcError
from dsh.frontends.acp._session import AcpSession, PendingSteer

if TYPE_CHECKING:
    from dsh.services.llm import ContentBlock, MessageSource

__all__ = ["META_KEY", "METHOD", "settle_steers", "steer", "steer_logged"]

METHOD = "_dsh/session/steer"
META_KEY = "dsh.dev/steer"
"""The ``agentCapabilities._meta`` key that advertises :data:`METHOD` (``{"method": METHOD}``, to every client:
it changes nothing for a client that never sends it; :data:`dsh.frontends.acp._boot.STEER_META`)."""


async def steer(record: AcpSession, content: list[ContentBlock], prompt: list[dict[str, Any]]) -> dict[str, Any]:
    """Hand *content* to the running turn of *record*'s agent and wait until it is in (see the module docstring)."""
    agent = record.handle.agent
    if agent.status != "running":
        raise RpcError(
            INVALID_PARAMS,
            f"no turn is running in session {record.id}: send the text as session/prompt",
            {"sessionId": record.id, "reason": "idle"},
        )
    pending = PendingSteer(str(uuid.uuid4()), prompt)
    record.steers[pending.message_id] = pending
    source: MessageSource = {"kind": "user", "message_id": pending.message_id}
    if any(isinstance(block, dict) and block.get("type") != "text" for block in prompt):
        source["shown"] = prompt  # a load replays what the user sent (links, resources), as for a prompt
    try:
        agent.steer(content, source)
        await pending.done.wait()
    finally:
        record.steers.pop(pending.message_id, None)
    assert pending.outcome is not None
    return pending.outcome


def steer_logged(record: AcpSession, kind: str, data: dict[str, Any]) -> None:
    """A ``steering/message`` or ``user/message`` of *record*'s session: answer the steer it carries, if any."""
    if not record.steers:
        return
    source = data.get("source")
    message_id = source.get("message_id") if isinstance(source, dict) else None
    pending = record.steers.get(message_id) if isinstance(message_id, str) else None
    if pending is None:
        return
    outcome = "steered" if kind == "steering/message" else "queued"
    turn = data.get("turn", record.current_turn)
    pending.settle({"outcome": outcome, "turn": turn})


def settle_steers(record: AcpSession) -> None:
    """Answer every steer of *record* still waiting ``cancelled`` (after a cancel, or when the agent went idle
    without taking it), with its text given back."""
    for pending in list(record.steers.values()):
        pending.settle({"outcome": "cancelled", "prompt": pending.prompt})
