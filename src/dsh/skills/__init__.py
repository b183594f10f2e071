"""Skills (the Agent Skills format): folders with a ``SKILL.md`` found in the project and the user's config
directory, listed in the system prompt by name and description, loaded on demand with the ``skill`` tool, offered
as slash commands (RFC 0035). See ``README.md``."""

from dsh.skills._config import SkillsConfig
from dsh.skills._discover import MAX_DESCRIPTION, MAX_SKILL_BYTES, MAX_SKILLS, Skill, discover_skills
from dsh.skills._narrow import CLAUDE_TOOLS, permits
from dsh.skills._plugin import SKILL_TOOL, SKILLS_ORDER, Skills, skills_plugin, skills_text

__all__ = [
    "CLAUDE_TOOLS",
    "MAX_DESCRIPTION",
    "MAX_SKILLS",
    "MAX_SKILL_BYTES",
    "SKILLS_ORDER",
    "SKILL_TOOL",
    "Skill",
    "Skills",
    "SkillsConfig",
    "discover_skills",
    "permits",
    "skills_plugin",
    "skills_text",
]
