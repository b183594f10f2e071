"""The model vocabulary: content blocks, messages, stream chunks, finish reasons, requests.

Blocks, messages and chunks are plain JSON dictionaries typed with ``TypedDict``: they go straight into the
session log (which only accepts lossless JSON) and onto the wire, and a streamed chunk is the hottest object in
the product, so it must cost one dict and nothing more. Keys are snake_case throughout the log.

Adapter contract (what every ``llm`` adapter promises and every consumer must tolerate):

* a stream is a sequence of chunks ending with exactly one ``finish``; ``usage`` comes before ``finish``;
  nothing comes after ``finish``;
* a failure either raises from the stream or ends it with ``finish`` of kind ``error`` (or ``aborted``):
  consumers handle both.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypeAlias, TypedDict

if TYPE_CHECKING:
    from dsh.kernel import CancelToken

__all__ = [
    "BlockEnd",
    "Adapter",
    "ContentBlock",
    "FinishChunk",
    "FinishReason",
    "GenerateRequest",
    "ImageBlock",
    "Message",
    "MessageSource",
    "ReasoningBlock",
    "ReasoningDelta",
    "StreamChunk",
    "TextBlock",
    "TextDelta",
    "ToolCallBlock",
    "ToolCallDelta",
    "ToolResultBlock",
    "ToolSchema",
    "Usage",
    "UsageChunk",
]


class TextBlock(TypedDict):
    type: Literal["text"]
    text: str


class ReasoningBlock(TypedDict):
    type: Literal["reasoning"]
    text: str


class ToolCallBlock(TypedDict):
    type: Literal["tool-call"]
    id: str
    """Unique within the session (what the editor, the tools and the log use)."""
    name: str
    arguments: str
    """The raw JSON text the model produced; parsed only when the tool runs."""
    provider_id: NotRequired[str]
    """In a logged ``assistant/message`` only: the provider's own id when the loop had to change it (the
    provider reused an id); ``Session.derive_messages`` gives it back to the provider."""


class ToolResultBlock(TypedDict):
    type: Literal["tool-result"]
    tool_call_id: str
    content: list[ContentBlock]
    is_error: bool


class ImageBlock(TypedDict):
    """An image the model sees. Blocks made by :func:`dsh.images.image_block` (every image dsh accepts) carry a
    ``data:`` URL of checked PNG/JPEG/GIF/WebP bytes and describe themselves, so nothing downstream decodes them
    to count or describe them; adapters send only ``url``."""

    type: Literal["image"]
    url: str
    """A URL or a ``data:`` URI."""
    mime_type: NotRequired[str]
    width: NotRequired[int]
    height: NotRequired[int]
    size: NotRequired[int]
    """Bytes of the image (decoded)."""
    name: NotRequired[str]
    """Where it came from, when known (a file's path)."""


ContentBlock: TypeAlias = TextBlock | ReasoningBlock | ToolCallBlock | ToolResultBlock | ImageBlock


class Message(TypedDict):
    role: Literal["user", "assistant"]
    content: list[ContentBlock]


class MessageSource(TypedDict):
    """Who put a message into the conversation: ``user``, ``plugin`` (with ``plugin``), ``agent`` (with ``agent_id``).

    ``message_id`` names one submitted message: a front end sets it to recognise, in the log, the
    ``user/message`` (and so the turn) that consumed its prompt, and replays show it as the message's id.
    ``shown`` keeps the message as the user's client showed it when that differs from what the model gets
    (an ACP resource link is rendered into text for the model, but replays give back the link).
    """

    kind: Literal["user", "plugin", "agent"]
    plugin: NotRequired[str]
    agent_id: NotRequired[str]
    message_id: NotRequired[str]
    shown: NotRequired[list[dict[str, Any]]]


class Usage(TypedDict, total=False):
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    reasoning_tokens: int
    total_tokens: int


class FinishReason(TypedDict):
    """``kind`` is stop | tool-calls | max-tokens | aborted | error; errors carry ``message`` and maybe ``code``."""

    kind: Literal["stop", "tool-calls", "max-tokens", "aborted", "error"]
    message: NotRequired[str]
    code: NotRequired[str]


class TextDelta(TypedDict):
    type: Literal["text-delta"]
    text: str


class ReasoningDelta(TypedDict):
    type: Literal["reasoning-delta"]
    text: str


class ToolCallDelta(TypedDict):
    """A piece of a tool call; ``id`` ties the pieces together, ``name`` comes with (at least) the first."""

    type: Literal["tool-call-delta"]
    id: str
    name: NotRequired[str]
    arguments_delta: str


class BlockEnd(TypedDict):
    type: Literal["block-end"]
    block: ContentBlock


class UsageChunk(TypedDict):
    type: Literal["usage"]
    usage: Usage


class FinishChunk(TypedDict):
    type: Literal["finish"]
    reason: FinishReason


StreamChunk: TypeAlias = TextDelta | ReasoningDelta | ToolCallDelta | BlockEnd | UsageChunk | FinishChunk


class ToolSchema(TypedDict):
    """What the model is told about a tool (only these keys ever reach a provider)."""

    name: str
    description: str
    parameters: dict[str, Any]
    strict: NotRequired[bool]


@dataclass(frozen=True, slots=True)
class GenerateRequest:
    """One model call. Frozen: waterfall listeners rewrite it with :func:`dataclasses.replace`."""

    model: str
    messages: list[Message]
    system: str | None = None
    tools: list[ToolSchema] | None = None
    signal: CancelToken | None = field(default=None, compare=False)
    temperature: float | None = None
    max_tokens: int | None = None
    stop: list[str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    """Provider-specific options, passed through untouched."""


Adapter: TypeAlias = Callable[[GenerateRequest], AsyncIterator[StreamChunk]]
"""A model adapter: a function from a request to a chunk stream (usually an async generator function)."""
