"""Skills (the Agent Skills format): folders with a ``SKILL.md`` found in the project and the user's config
directory, listed in the system prompt by name and description, loaded on demand with the ``skill`` tool, offered
as slash commands (RFC 0035). See ``README.md``."""

from dsh.skills._config import SkillsConfig
from dsh.skills._discover import discover_skills
from dsh.skills._narrow import CLAUDE_TOOLS
from dsh.skills._plugin import skills_plugin

__all__ = [
    "CLAUDE_TOOLS",
    "SkillsConfig",
    "discover_skills",
    "skills_plugin",
]
