"""Tool-call ids unique within a session, the provider's own kept for the provider.

OpenAI-compatible servers (vLLM, Ollama, llama.cpp and others) number their calls per response (``call_0`` on
every turn), and the scripted model's default ids start again after a restart; editors key tool cards by id, so
two calls with one id merge or overwrite each other's card. The loop therefore gives every call an id nobody in
the session has used yet, at the moment its first chunk arrives, and keeps the provider's:

* A provider id the session has not used is kept as it is (OpenAI's ``call_…``, Anthropic's ``toolu_…`` are
  unique already): a log of such a provider reads exactly as before.
* A reused one becomes ``<id>-<n>`` with the smallest ``n`` >= 2 free in the session. Every chunk, block and
  event the loop writes (``assistant/chunk``, ``assistant/message``, ``tool/call``, ``tool/result``), every
  listener and every tool execution sees that id, so the editor's cards, permission requests and the replay of
  ``session/load`` (which projects the stored events) agree.
* The provider's id is kept where it differs, in one place of the log: ``provider_id`` on the ``tool-call``
  block of ``assistant/message``. ``Session.derive_messages`` gives the conversation back in the provider's ids
  (the call from that block, its result through the mapping the block gives), so a provider gets its own ids in
  the follow-up request; nothing else in the loop needs to know.
* The ids in use are read from the log once per agent (``tool/call`` events, ``tool-call`` blocks), so a
  restarted daemon does not hand out an id an earlier process showed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from dsh.services.llm import Message, StreamChunk
    from dsh.services.sessions import Session

__all__ = ["SessionCallIds", "StepCallIds"]


class SessionCallIds:
    """The tool-call ids one session has used, read from its log on first need and kept up to date."""

    __slots__ = ("_session", "_used")

    def __init__(self, session: Session) -> None:
        self._session = session
        self._used: set[str] | None = None

    def _ids(self) -> set[str]:
        used = self._used
        if used is None:
            used = set()
            for event in self._session.events_without_chunks():
                data = event.data
                if event.type == "tool/call":
                    if isinstance(data.get("call_id"), str):
                        used.add(data["call_id"])
                elif event.type == "assistant/message":
                    for block in data.get("content") or ():
                        if (
                            isinstance(block, dict)
                            and block.get("type") == "tool-call"
                            and isinstance(block.get("id"), str)
                        ):
                            used.add(block["id"])
            self._used = used
        return used

    def step(self) -> StepCallIds:
        """The renamer of one model call: one provider id maps to one session id for all of its chunks."""
        return StepCallIds(self._ids())


class StepCallIds:
    """Provider id → session id within one model call (a call's deltas all carry its id)."""

    __slots__ = ("_renamed", "_taken", "_used")

    def __init__(self, used: set[str]) -> None:
        self._used = used
        self._taken: dict[str, str] = {}
        self._renamed: dict[str, str] = {}
        """Session id → provider id, for the calls whose id changed."""

    def session_id(self, provider_id: str) -> str:
        taken = self._taken.get(provider_id)
        if taken is not None:
            return taken
        chosen, n = provider_id, 1
        while chosen in self._used:
            n += 1
            chosen = f"{provider_id}-{n}"
        self._used.add(chosen)
        self._taken[provider_id] = chosen
        if chosen != provider_id:
            self._renamed[chosen] = provider_id
        return chosen

    def rename(self, chunk: StreamChunk) -> StreamChunk:
        """*chunk* with its tool-call id made the session's (a new dict when it changes; others unchanged)."""
        raw: dict[str, Any] = chunk  # type: ignore[assignment]
        kind = raw["type"]
        if kind == "tool-call-delta" and isinstance(raw.get("id"), str):
            chosen = self.session_id(raw["id"])
            return chunk if chosen == raw["id"] else cast("StreamChunk", {**raw, "id": chosen})
        if kind == "block-end":
            block = raw.get("block")
            if isinstance(block, dict) and block.get("type") == "tool-call" and isinstance(block.get("id"), str):
                chosen = self.session_id(block["id"])
                if chosen != block["id"]:
                    return cast("StreamChunk", {**raw, "block": {**block, "id": chosen}})
        return chunk

    def mark(self, message: Message) -> Message:
        """*message* with ``provider_id`` on each tool-call block whose id was changed (blocks copied)."""
        if not self._renamed:
            return message
        content: list[Any] = []
        for block in message["content"]:
            original = self._renamed.get(block.get("id", "")) if block["type"] == "tool-call" else None
            content.append({**block, "provider_id": original} if original is not None else block)
        return cast("Message", {**message, "content": content})
