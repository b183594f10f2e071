"""The context plugin's configuration keys (``system_prompt_sections``, ``compaction``), as pydantic models
referenced from :mod:`dsh.config`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from dsh.config import DshConfig

__all__ = ["CompactionConfig", "ContextConfig", "SectionOverrides", "context_from_file"]

SectionOverrides = dict[str, Literal[False] | str]
"""``{name: false}`` removes a section, ``{name: "text"}`` replaces its text (a name no plugin registered adds a
section with that text after the built-in ones)."""


class CompactionConfig(BaseModel):
    """``compaction:`` — when and how older history is summarised."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    enabled: bool = True
    model: str | None = Field(default=None, min_length=1)
    """The summarising model (``provider:model``); default: the session's own model."""
    threshold: float = Field(default=0.8, gt=0, le=1)
    """Compact when the context in use passes this fraction of the model's window."""
    keep_recent_turns: int = Field(default=2, ge=0)
    """The most recent turns stay verbatim."""
    turn_tail: float = Field(default=0.3, gt=0, lt=1)
    """When a compaction cuts inside the running turn: the fraction of the window its most recent steps may keep
    verbatim (the rest of the turn, its user messages aside, is summarised)."""
    prune: bool = True
    """Before summarising, replace old tool results by one-line stubs when that alone frees enough."""
    prune_protect: int = Field(default=40_000, ge=0)
    """Tokens of the most recent tool output never pruned (at most a quarter of the window)."""
    prune_minimum: int = Field(default=20_000, ge=0)
    """A prune must free at least this many tokens (at most a tenth of the window): each costs a cache miss."""


class ContextConfig(BaseModel):
    """The context plugin's whole config (what :func:`dsh.app.load_core` passes it)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    sections: SectionOverrides = Field(default_factory=dict)
    compaction: CompactionConfig = Field(default_factory=CompactionConfig)
    instructions_cap: int = Field(default=32_000, ge=0)
    """Characters of project instructions at most (a cut is visible to the model)."""


def context_from_file(loaded: DshConfig | None) -> ContextConfig | None:
    """The context plugin's config from a loaded configuration file (None: the defaults)."""
    if loaded is None:
        return None
    return ContextConfig.model_construct(sections=dict(loaded.system_prompt_sections), compaction=loaded.compaction)
