"""Session modes and the permission policy, as pure logic (no I/O): what a tool call may do without asking.

Modes (offered as ACP ``modes`` and as a config option of category ``mode``, kept in sync):

| mode           | reads, searches | edits        | commands     | paths outside the session's directory |
|----------------|-----------------|--------------|--------------|---------------------------------------|
| ``default``    | allowed         | ask          | ask          | ask                                   |
| ``accept-edits`` | allowed       | allowed      | ask          | ask                                   |
| ``plan``       | allowed         | refused      | refused      | refused                               |
| ``bypass``     | allowed         | allowed      | allowed      | allowed                               |

"Always" answers become rules for the session, keyed by tool name: a rule wins over asking (never over plan
mode's refusals), and an "always allow" never covers paths outside the session's directory (they still ask). Rules are recorded in the session log as ``permission/rule`` events so a loaded session
keeps them.

A tool may say it ``asks`` (its meta; MCP tools that are not read-only do): it is then treated like a command
whatever its kind (asks in ``default`` and ``accept-edits``, refused in ``plan``, allowed in ``bypass``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "MODES",
    "MODE_IDS",
    "RULE_EVENT",
    "RUNNING_EVENT",
    "Decision",
    "PERMISSION_OPTIONS",
    "SessionPolicy",
    "mode_state",
    "rules_from_log",
]

Decision = Literal["allow", "ask", "refuse"]

MODES: tuple[tuple[str, str, str], ...] = (
    ("default", "Default", "Ask before edits and commands"),
    ("accept-edits", "Accept edits", "Edits are allowed; commands ask first"),
    ("plan", "Plan", "Read-only: edit and command tools are refused"),
    ("bypass", "Bypass permissions", "Never ask"),
)
MODE_IDS = frozenset(mode for mode, _, _ in MODES)
EDIT_KINDS = frozenset({"edit", "delete", "move"})
COMMAND_KINDS = frozenset({"execute"})
RULE_EVENT = "permission/rule"
RUNNING_EVENT = "tool/running"
"""Logged by the permission gate when it lets a call run: the card goes ``pending`` → ``in_progress``. In the log
(not only on the wire) so that a replay shows the same transitions as the live stream did."""

PERMISSION_OPTIONS: tuple[tuple[str, str], ...] = (
    ("allow_once", "Allow"),
    ("allow_always", "Always allow {tool}"),
    ("reject_once", "Reject"),
    ("reject_always", "Always reject {tool}"),
)


@dataclass
class SessionPolicy:
    mode: str = "default"
    rules: dict[str, Literal["allow", "reject"]] = field(default_factory=dict)

    def decide(self, tool: str, kind: str, *, outside: bool, asks: bool = False) -> Decision:
        """What to do with a call to *tool* (of *kind*) before it runs."""
        mutating = kind in EDIT_KINDS or kind in COMMAND_KINDS or asks
        if self.mode == "plan" and (mutating or outside):
            return "refuse"
        if self.mode == "bypass":
            return "allow"
        rule = self.rules.get(tool)
        if rule == "reject":
            return "refuse"
        if outside:  # an "always allow" given inside the project never reaches outside it
            return "ask"
        if rule == "allow":
            return "allow"
        if kind in EDIT_KINDS and not asks:
            return "allow" if self.mode == "accept-edits" else "ask"
        if kind in COMMAND_KINDS or asks:
            return "ask"
        return "allow"

    def refusal(self, tool: str, kind: str, *, outside: bool, once: bool = False, asks: bool = False) -> str:
        """A message the model can act on, for a refused call (*once*: the user declined this call only)."""
        if once:
            return (
                f"The user declined this {tool} call. It did not run. Do not repeat it unchanged; "
                "ask the user or try another way."
            )
        if self.mode == "plan":
            what = (
                "paths outside the session's directory"
                if outside and not asks and kind not in EDIT_KINDS | COMMAND_KINDS
                else tool
            )
            return (
                f"Plan mode is on: {what} is not available (read-only). Describe the change you would make, "
                "or ask the user to leave plan mode."
            )
        return f"The user does not allow {tool} in this session. Do not retry it; continue another way or ask."


def mode_state(current: str) -> dict[str, Any]:
    """ACP ``SessionModeState``."""
    return {
        "currentModeId": current,
        "availableModes": [{"id": mode, "name": name, "description": text} for mode, name, text in MODES],
    }


def rules_from_log(events: Any) -> dict[str, Literal["allow", "reject"]]:
    """The "always" rules recorded in a session log (the last word per tool wins)."""
    rules: dict[str, Literal["allow", "reject"]] = {}
    for event in events:
        if event.type == RULE_EVENT:
            tool, decision = event.data.get("tool"), event.data.get("decision")
            if isinstance(tool, str) and decision in ("allow", "reject"):
                rules[tool] = decision
    return rules
