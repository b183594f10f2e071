"""Pydantic models for the params of the ACP requests we accept (ACP v1, camelCase on the wire).

Inbound models are lenient where the protocol asks for leniency (unknown fields are ignored, ``_meta`` is
accepted anywhere) and strict where a wrong value would do harm (ids and paths are strings, prompts are
lists of typed blocks). Outbound messages are plain dicts built by the projection: they are validated against
the official SDK's models in the tests, not here, so the hot path pays for no model construction.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

__all__ = [
    "AuthenticateParams",
    "CancelParams",
    "InitializeParams",
    "ListSessionsParams",
    "LoadSessionParams",
    "LogoutParams",
    "NewSessionParams",
    "PromptParams",
    "SessionIdParams",
    "SetConfigOptionParams",
    "SetModeParams",
    "SetModelParams",
    "SteerParams",
]


MAX_PATH = 4096
"""Linux's ``PATH_MAX``: no longer path can be opened, so a longer ``cwd`` is bad params, not an internal error."""


def _usable_path(value: str) -> str:
    if "\0" in value:
        raise ValueError("a path may not contain a NUL character")
    if len(value.encode("utf-8", "surrogatepass")) > MAX_PATH:
        raise ValueError(f"a path may not be longer than {MAX_PATH} bytes")
    return value


Path = Annotated[str, AfterValidator(_usable_path)]
"""A path the client sends (``cwd``, additional directories): no NUL, at most :data:`MAX_PATH` bytes; anything
else answers -32602 before a file system call can fail on it."""


class Wire(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="ignore",
        frozen=True,
        defer_build=True,  # built on first use: start-up (spawn → initialize) pays only for what it parses
    )
    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class InitializeParams(Wire):
    protocol_version: int
    client_capabilities: dict[str, Any] = Field(default_factory=dict)
    client_info: dict[str, Any] | None = None

    @field_validator("protocol_version", mode="before")
    @classmethod
    def _legacy_string_version(cls, value: Any) -> Any:
        # Early clients sent a date string (e.g. "2024-11-05"); they speak version 1.
        if isinstance(value, str) and not value.isdigit():
            return 1
        return value


class AuthenticateParams(Wire):
    method_id: str


class LogoutParams(Wire):
    pass


class NewSessionParams(Wire):
    cwd: Path
    mcp_servers: list[dict[str, Any]] = Field(default_factory=list)
    additional_directories: list[Path] = Field(default_factory=list)
    system_prompt: Any = None
    """``SystemPrompt`` (checked by :func:`~._client_prompt.parse_system_prompt`)."""


class LoadSessionParams(Wire):
    session_id: str
    cwd: Path
    mcp_servers: list[dict[str, Any]] = Field(default_factory=list)
    additional_directories: list[Path] = Field(default_factory=list)
    system_prompt: Any = None


class ListSessionsParams(Wire):
    cwd: Path | None = None
    cursor: str | None = None


class SessionIdParams(Wire):
    session_id: str


class SetConfigOptionParams(Wire):
    session_id: str
    config_id: str
    value: str | bool


class SetModeParams(Wire):
    session_id: str
    mode_id: str


class SetModelParams(Wire):
    session_id: str
    model_id: str


class PromptParams(Wire):
    session_id: str
    prompt: list[dict[str, Any]]


class SteerParams(PromptParams):
    """``_dsh/session/steer``: the same fields as ``session/prompt`` (:mod:`._steer`)."""


class CancelParams(Wire):
    session_id: str


class TextContent(Wire):
    type: Literal["text"]
    text: str


class ResourceLinkContent(Wire):
    type: Literal["resource_link"]
    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None


class EmbeddedResource(Wire):
    uri: str
    text: str | None = None
    blob: str | None = None
    mime_type: str | None = None


class ResourceContent(Wire):
    type: Literal["resource"]
    resource: EmbeddedResource


class ImageContent(Wire):
    type: Literal["image"]
    data: str
    mime_type: str
    uri: str | None = None
