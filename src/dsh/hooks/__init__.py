"""Hooks in Claude Code's format: commands dsh runs at its events (``SessionStart``, ``UserPromptSubmit``,
``PreToolUse``, ``PostToolUse``, ``Stop``, ``SubagentStop``, ``PreCompact``, ``SessionEnd``, ``Notification``),
from the user's configuration file and, once approved, the project's ``.dsh/settings.yaml`` (opt-in:
``.claude/settings.json``). RFC 0035; see ``README.md``."""

from dsh.hooks._config import EVENTS, HookCommand, HookEvent, HookGroup, HooksConfig
from dsh.hooks._plugin import HOOK_BLOCKED, MAX_STOP_BLOCKS, RUN_EVENT, HookBlocked, Hooks, HooksOptions, hooks_plugin
from dsh.hooks._run import OUTPUT_LIMIT, Answer, run_hook
from dsh.hooks._sources import (
    Hook,
    TrustStore,
    claude_name,
    list_hooks,
    matches,
    project_digest,
    project_hooks,
    project_root,
)

__all__ = [
    "EVENTS",
    "HOOK_BLOCKED",
    "MAX_STOP_BLOCKS",
    "OUTPUT_LIMIT",
    "RUN_EVENT",
    "Answer",
    "Hook",
    "HookBlocked",
    "HookCommand",
    "HookEvent",
    "HookGroup",
    "Hooks",
    "HooksConfig",
    "HooksOptions",
    "TrustStore",
    "claude_name",
    "hooks_plugin",
    "list_hooks",
    "matches",
    "project_digest",
    "project_hooks",
    "project_root",
    "run_hook",
]
