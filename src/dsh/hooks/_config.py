"""``hooks:`` in the configuration file and in a project's ``.dsh/settings.yaml``: Claude Code's schema, so a
pasted block works (RFC 0035)."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["EVENTS", "HookCommand", "HookEvent", "HookGroup", "HooksConfig"]

HookEvent = Literal[
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "Stop",
    "SubagentStop",
    "PreCompact",
    "SessionEnd",
    "Notification",
]
EVENTS: tuple[HookEvent, ...] = get_args(HookEvent)
"""The nine events, in the order Claude Code documents them (the ``Literal``'s own order)."""


class HookCommand(BaseModel):
    """One hook: a shell command (``type: command``, the only type dsh runs) and its timeout in seconds."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["command"] = "command"
    command: str = Field(min_length=1)
    timeout: float = Field(default=60.0, gt=0, le=3600)


class HookGroup(BaseModel):
    """A matcher and its hooks: for tool events the matcher is a regular expression on the tool's name (Claude's
    names or dsh's; ``*`` or empty: every tool); for ``SessionStart`` the source, ``PreCompact`` the trigger,
    ``Notification`` the kind; other events ignore it."""

    model_config = ConfigDict(extra="ignore")

    matcher: str = ""
    hooks: list[HookCommand] = Field(default_factory=list)


class HooksConfig(BaseModel):
    """``hooks:``: the events (each a list of :class:`HookGroup`) and ``import: [claude]`` (also read the
    project's ``.claude/settings.json`` hooks; only in the user's file: a project cannot opt itself in)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)

    SessionStart: list[HookGroup] = Field(default_factory=list)
    UserPromptSubmit: list[HookGroup] = Field(default_factory=list)
    PreToolUse: list[HookGroup] = Field(default_factory=list)
    PostToolUse: list[HookGroup] = Field(default_factory=list)
    Stop: list[HookGroup] = Field(default_factory=list)
    SubagentStop: list[HookGroup] = Field(default_factory=list)
    PreCompact: list[HookGroup] = Field(default_factory=list)
    SessionEnd: list[HookGroup] = Field(default_factory=list)
    Notification: list[HookGroup] = Field(default_factory=list)
    imports: list[Literal["claude"]] = Field(default_factory=list, alias="import")
    enabled: bool = True
    """Off: no hook runs, from any source."""

    def groups(self, event: HookEvent) -> list[HookGroup]:
        groups: list[HookGroup] = getattr(self, event)
        return groups
