"""The ``lsp`` section of the configuration file (pydantic only: importing it starts nothing)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["LspConfig", "ServerConfig"]


class ServerConfig(BaseModel):
    """A language server: its argv (speaking LSP on stdio), the languages it serves, its initialization options."""

    model_config = ConfigDict(extra="forbid")
    command: list[str] = Field(min_length=1)
    languages: list[str] = Field(min_length=1)
    init_options: dict[str, Any] = Field(default_factory=dict)


class LspConfig(BaseModel):
    """``lsp:``: off unless ``enabled: true`` (RFC 0037: opt-in while the start-up cost is per daemon and root).
    ``timeout``: seconds an edit waits for its diagnostics, server start included (the bound: the edit's result
    is never later than that); ``severity``: the least severe level reported (``error`` by default);
    ``servers``: servers of the user's, tried before the built-in candidates of their languages; ``idle``: seconds
    unused before a server is stopped (started again by the next edit)."""

    model_config = ConfigDict(extra="forbid")
    enabled: bool = False
    timeout: float = Field(default=2.0, gt=0, le=60)
    severity: Literal["error", "warning", "information", "hint"] = "error"
    servers: dict[str, ServerConfig] = Field(default_factory=dict)
    idle: float = Field(default=900.0, gt=0)
    """Seconds a server may go unused (no edit, no ``diagnostics`` call) before it is stopped."""
