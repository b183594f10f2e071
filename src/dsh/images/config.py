"""The config file's ``images`` section (a public module of its own: :mod:`dsh.images` stays free of pydantic,
because the daemon answers its first ``initialize`` with the standard library only)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from dsh.images._blocks import DEFAULT_MAX_PER_PROMPT

__all__ = ["ImagesConfig"]


class ImagesConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    max_per_prompt: int = Field(default=DEFAULT_MAX_PER_PROMPT, ge=0, le=1000)
    """Images one prompt may carry (0: none); a prompt with more is refused with -32602, nothing stored."""
