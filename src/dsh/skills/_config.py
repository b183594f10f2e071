"""``skills:`` in the configuration file."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["SkillsConfig"]


class SkillsConfig(BaseModel):
    """Where skills are looked for (``skills:`` in the file; RFC 0035)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    """Off: no skills section, no ``skill`` tool, no skill commands."""
    claude: bool = False
    """Also read the project's ``.claude/skills/`` (Claude Code's folder; opt-in, since its skills were written
    for another agent's tools)."""
