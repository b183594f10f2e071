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
