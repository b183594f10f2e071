"""The ``lsp`` section of the configuration file (pydantic only: importing it starts nothing)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["LSP_ENV", "LspConfig", "ServerConfig", "from_environment"]

LSP_ENV = "DSH_LSP"
"""``DSH_LSP=off|auto|on`` overrides ``lsp.enabled`` (as ``DSH_MODEL`` overrides ``model``); the test suite's
shared daemon environment sets ``off`` so that unrelated tests start no language server."""


class ServerConfig(BaseModel):
    """A language server: its argv (speaking LSP on stdio), the languages it serves, its initialization options."""

    model_config = ConfigDict(extra="forbid")
    command: list[str] = Field(min_length=1)
    languages: list[str] = Field(min_length=1)
    init_options: dict[str, Any] = Field(default_factory=dict)


class LspConfig(BaseModel):
    """``lsp:``. ``enabled``: ``auto`` (the default: servers found on ``PATH`` or beside dsh's Python, for roots
    that look like a project of the language), ``true`` (every root), ``false`` (no plugin at all; RFC 0037).
    ``timeout``: seconds an edit waits for its diagnostics (the bound: the edit's result is never later than that);
    ``start_wait``: of those, seconds an edit waits for a server that is still starting (a cold server is started
    when the model reads a file of its language, so it is usually warm by the edit); ``severity``: the least
    severe level reported (``error`` by default); ``servers``: servers of the user's, tried before the built-in
    candidates of their languages; ``idle``: seconds unused before a server is stopped (started again by the next
    read or edit)."""

    model_config = ConfigDict(extra="forbid")
    enabled: bool | Literal["auto"] = "auto"
    timeout: float = Field(default=2.0, gt=0, le=60)
    start_wait: float = Field(default=0.5, ge=0, le=60)
    severity: Literal["error", "warning", "information", "hint"] = "error"
    servers: dict[str, ServerConfig] = Field(default_factory=dict)
    idle: float = Field(default=900.0, gt=0)
    """Seconds a server may go unused (no edit, no ``diagnostics`` call) before it is stopped."""
    network: bool = False
    """Whether servers reach the network: false (default) cuts it even where approved commands have it (a server
    runs without a question on code the model wrote: rust-analyzer builds ``build.rs``, a TypeScript server loads
    the project's ``tsserver``); true follows ``sandbox.network``."""

    @field_validator("enabled", mode="before")
    @classmethod
    def _words(cls, value: Any) -> Any:
        """``on``/``off`` written as strings mean true/false (YAML 1.1 already reads the bare words so)."""
        if isinstance(value, str) and value.lower() in ("on", "off"):
            return value.lower() == "on"
        return value

    @property
    def active(self) -> bool:
        """Whether the plugin is loaded at all (``enabled`` is ``auto`` or true)."""
        return self.enabled is not False


_WORDS: dict[str, bool | Literal["auto"]] = {
    "off": False,
    "false": False,
    "0": False,
    "on": True,
    "true": True,
    "1": True,
    "auto": "auto",
}


def from_environment(config: LspConfig | None, environ: Mapping[str, str]) -> LspConfig:
    """*config* (None: the defaults) with ``DSH_LSP`` (``off``, ``auto`` or ``on``; ``false``/``true`` too)
    applied; any other value, or none, leaves ``enabled`` as the file says."""
    config = config if config is not None else LspConfig()
    value = environ.get(LSP_ENV, "").strip().lower()
    enabled = _WORDS.get(value)
    return config if enabled is None else config.model_copy(update={"enabled": enabled})
