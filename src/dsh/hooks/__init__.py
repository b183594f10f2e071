"""Hooks in Claude Code's format: commands dsh runs at its events (``SessionStart``, ``UserPromptSubmit``,
``PreToolUse``, ``PostToolUse``, ``Stop``, ``SubagentStop``, ``PreCompact``, ``SessionEnd``, ``Notification``),
from the user's configuration file and, once approved, the project's ``.dsh/settings.yaml`` (opt-in:
``.claude/settings.json``). RFC 0035; see ``README.md``."""

from dsh.hooks._config import HooksConfig
from dsh.hooks._plugin import HooksOptions, hooks_plugin
from dsh.hooks._sources import list_hooks

__all__ = [
    "HooksConfig",
    "HooksOptions",
    "hooks_plugin",
    "list_hooks",
]
