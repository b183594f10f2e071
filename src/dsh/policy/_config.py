"""The config file's ``permissions:`` section, and the policy of a run nobody can be asked in (``dsh prompt``).

```yaml
permissions:
  mode: default              # new sessions' mode: default, accept-edits, plan or bypass
  allow: ["run_command(npm test)", "run_command(git diff)", "edit_file(src/**)"]
  ask: ["run_command(git push)"]
  deny: ["run_command(rm -rf)", "read_file(.env)", "write_file(*.lock)"]
```

A pattern is a tool name, or ``tool(scope)``: a command prefix for ``run_command`` (``npm run test:*`` is accepted
and means ``npm run test``), a path pattern for file tools (the one glob dialect, :mod:`dsh.globs`: relative to
the session's directory, ``*.md`` at every depth, ``./*.md`` at the top, or absolute; ``..`` is refused). Deny wins over ask, ask over allow. ``dsh config check`` reports a bad pattern with its line.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from dsh.policy._modes import DEFAULT_MODE, MODE_IDS
from dsh.policy._plugin import PolicyConfig
from dsh.policy._rules import parse_pattern

__all__ = ["PermissionsConfig", "policy_config", "unattended_policy"]

UNATTENDED_HINT = (
    "{tool} was not allowed: {why}, and nobody can approve it in this run. It did not run. Continue without it, "
    "or end by saying what you need allowed ({flags})."
)


def _pattern(value: str) -> str:
    parse_pattern(value, "allow")  # raises ValueError with a message the user can act on
    return value


Pattern = Annotated[str, AfterValidator(_pattern)]


class PermissionsConfig(BaseModel):
    """The ``permissions:`` section (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    mode: str = DEFAULT_MODE
    allow: list[Pattern] = Field(default_factory=list)
    ask: list[Pattern] = Field(default_factory=list)
    deny: list[Pattern] = Field(default_factory=list)

    def changed_rules(self) -> list[str]:
        """The section's path rules whose meaning moved with the one glob dialect, one line each with the way
        back (RFC 0041); empty when none did. ``dsh config check`` prints them, the daemon says them once."""
        from dsh.policy._migration import meaning_changes

        return meaning_changes(policy_config(self).rules)

    @field_validator("mode")
    @classmethod
    def _known_mode(cls, value: str) -> str:
        if value not in MODE_IDS:
            raise ValueError(f"unknown mode {value!r}; choose one of {', '.join(sorted(MODE_IDS))}")
        return value


def policy_config(permissions: PermissionsConfig | None, *, mode: str | None = None) -> PolicyConfig:
    """The policy of an attended front end (the ACP daemon): the section's rules, *mode* over its mode."""
    section = permissions or PermissionsConfig()
    return PolicyConfig(
        mode=mode or section.mode, allow=tuple(section.allow), ask=tuple(section.ask), deny=tuple(section.deny)
    )


def unattended_policy(
    permissions: PermissionsConfig | None = None,
    *,
    mode: str | None = None,
    allow_reads: bool = False,
    allow_edits: bool = False,
    allow_all: bool = False,
    flags: str = "--allow-reads, --allow-edits, --allow-all or a permissions: rule",
) -> PolicyConfig:
    """The policy of a run where nobody can be asked (``dsh prompt``, ``dsh exec``): whatever would ask is refused
    with a message that names *flags*. *allow_reads*: reads and searches anywhere, outside the session's
    directory too; *allow_edits*: edits inside it (accept-edits mode); *allow_all*: everything (bypass mode).
    *mode* (default: the section's) is the starting point the flags widen; plan mode stays read-only whatever
    the flags say, and deny patterns hold in every mode."""
    section = permissions or PermissionsConfig()
    chosen = mode or section.mode
    if chosen not in MODE_IDS:
        raise ValueError(f"unknown mode {chosen!r}; choose one of {', '.join(sorted(MODE_IDS))}")
    if chosen != "plan":
        if allow_all:
            chosen = "bypass"
        elif allow_edits and chosen == "default":
            chosen = "accept-edits"
    return PolicyConfig(
        mode=chosen,
        allow=tuple(section.allow),
        ask=tuple(section.ask),
        deny=tuple(section.deny),
        unattended=UNATTENDED_HINT.replace("{flags}", flags),
        reads_anywhere=allow_reads or (allow_all and chosen != "plan"),
    )
