"""The client's system prompt (``systemPrompt {mode, content}`` on ``session/new``, ``session/load``,
``session/resume``; ``sessionCapabilities.systemPrompt``, stable v1 since schema 1.30; RFC 0033).

Guarantees:

* ``append``: the client's text is one section named ``client`` after every section of dsh's (order 600, after the
  project's instructions at 500), so the model reads dsh's rules first and the client's additions last.
* ``override``: the client's text replaces dsh's base prompt (the ``identity`` section: who dsh is and how it
  works) and nothing else. The safety-relevant parts stay whatever the client says: ``tools`` (the tool
  contracts; ``run_command``'s states the sandbox's rules), the permission model (the mode reaches the model as a
  session note, outside the system prompt; a ``mode`` section a plugin adds is kept), a ``sandbox`` section when a
  plugin adds one; so do the facts (``environment``) and the project's own ``instructions``.
* The prompt is stored with the session (a ``system-prompt/client`` event, the latest one counts): a
  ``session/load`` or ``session/resume`` without ``systemPrompt`` restores it, one with ``systemPrompt`` replaces
  it. A bad value (an unknown mode, an empty list, a block that is not text) answers -32602 and nothing is created
  or opened.
* Only sessions this front end opened with a client prompt are touched; every other assembly passes unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from dsh.frontends.acp._rpc import INVALID_PARAMS, RpcError
from dsh.services.system_prompt import PromptSection

if TYPE_CHECKING:
    from dsh.kernel import Next
    from dsh.services.sessions import Session, SessionEvent
    from dsh.services.system_prompt import PromptAssembly

__all__ = ["CLIENT_PROMPT_EVENT", "CLIENT_SECTION", "KEPT_ON_OVERRIDE", "ClientPrompts", "parse_system_prompt"]

CLIENT_PROMPT_EVENT = "system-prompt/client"
CLIENT_SECTION = "client"
CLIENT_ORDER = 600
REPLACED_ON_OVERRIDE = "identity"
KEPT_ON_OVERRIDE = ("tools", "mode", "sandbox", "environment", "instructions")
"""What ``override`` never replaces: the tool contracts, the permission model, the sandbox rules, the facts."""


def parse_system_prompt(value: Any) -> tuple[str, str] | None:
    """``(mode, text)`` of a ``systemPrompt`` param (None when absent or null); -32602 for anything else."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise RpcError(INVALID_PARAMS, "systemPrompt must be an object", {"field": "systemPrompt"})
    mode = value.get("mode")
    if mode not in ("append", "override"):
        raise RpcError(
            INVALID_PARAMS, f"systemPrompt.mode {mode!r} is not supported (append or override)", {"field": "mode"}
        )
    content = value.get("content")
    if not isinstance(content, list) or not content:
        raise RpcError(INVALID_PARAMS, "systemPrompt.content must be a non-empty list", {"field": "content"})
    texts = []
    for block in content:
        if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
            raise RpcError(INVALID_PARAMS, "systemPrompt.content takes text blocks only", {"field": "content"})
        texts.append(block["text"])
    text = "\n\n".join(texts).strip()
    if not text:
        raise RpcError(INVALID_PARAMS, "systemPrompt.content is empty", {"field": "content"})
    return mode, text


class ClientPrompts:
    """The client prompt of each open session of this front end."""

    def __init__(self) -> None:
        self._prompts: dict[str, tuple[str, str]] = {}

    def get(self, session_id: str) -> tuple[str, str] | None:
        return self._prompts.get(session_id)

    def open(self, session: Session, given: tuple[str, str] | None, recorded: Iterable[SessionEvent] = ()) -> None:
        """The session's prompt: *given* (stored when it differs from the stored one), else the stored one."""
        stored = None
        for event in recorded:
            if event.type == CLIENT_PROMPT_EVENT:
                stored = (str(event.data.get("mode")), str(event.data.get("text")))
        if given is not None and given != stored:
            session.append(CLIENT_PROMPT_EVENT, {"mode": given[0], "text": given[1]})
        current = given if given is not None else stored
        if current is not None:
            self._prompts[session.id] = current

    def close(self, session_id: str) -> None:
        self._prompts.pop(session_id, None)

    async def on_assemble(
        self, assembly: PromptAssembly, next_: Next[PromptAssembly, PromptAssembly]
    ) -> PromptAssembly:
        """``system-prompt/assemble``: the client's section added (append) or the base prompt replaced
        (override), after every other listener built its sections."""
        result = await next_(assembly)
        agent = result.agent
        prompt = self._prompts.get(agent.session.id) if agent is not None else None
        if prompt is None:
            return result
        mode, text = prompt
        if mode == "override":
            result.sections = [
                PromptSection(s.name, s.order, text) if s.name == REPLACED_ON_OVERRIDE else s for s in result.sections
            ]
            if not any(s.name == REPLACED_ON_OVERRIDE for s in result.sections):
                result.sections = [PromptSection(REPLACED_ON_OVERRIDE, 100, text), *result.sections]
        else:
            result.sections = [*result.sections, PromptSection(CLIENT_SECTION, CLIENT_ORDER, text)]
        result.sections = sorted(result.sections, key=lambda s: s.order)
        return result
