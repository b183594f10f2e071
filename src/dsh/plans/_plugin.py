"""The ``update_plan`` tool: the model keeps a visible plan of multi-step work.

Guarantees:

* Each call replaces the whole plan: it appends one ``plan/update`` session event with the complete list of
  entries (``content``, ``status`` pending | in_progress | completed, ``priority`` high | medium | low), so the
  log holds every version, a front end shows the latest (ACP: a ``plan`` update, the full list each time), and a
  load replays them in order.
* Arguments are checked without pydantic (start-up stays light); a bad call is an error result that says what is
  wrong, and records nothing.
* The tool's first sentence says when to use it (models rarely keep a plan unless told): the system prompt's tools
  section, generated from the registered tools, carries it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dsh.errors import ToolArgsError
from dsh.kernel import plugin

if TYPE_CHECKING:
    from dsh.kernel import Context
    from dsh.services.tools import ToolExecution

__all__ = ["PLAN_DOCUMENT_EVENT", "PLAN_EVENT", "PLAN_GUIDANCE", "PLAN_MODE_PLAN", "plans_plugin", "validate_entries"]

PLAN_EVENT = "plan/update"
PLAN_DOCUMENT_EVENT = "plan/document"
"""A whole Markdown plan (``plan_id``, ``content``, ``path`` when it was written to a file): plan mode's finished
plan, appended by ``exit_plan_mode`` before it asks; the latest event of a ``plan_id`` is that plan."""
PLAN_MODE_PLAN = "plan-mode"
"""The ``plan_id`` of plan mode's finished plan (one per session: the next ``exit_plan_mode`` replaces it)."""
STATUSES = ("pending", "in_progress", "completed")
PRIORITIES = ("high", "medium", "low")
MAX_ENTRIES = 100
PLAN_GUIDANCE = (
    "For work of three or more steps, keep a visible plan: call this first with the whole plan, then again each "
    "time a step starts or finishes. Exactly one step is in_progress at a time; mark steps completed as soon as "
    "they are done. Each call replaces the whole list. Skip it for simple one-step requests."
)
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "entries": {
            "type": "array",
            "description": "The complete plan, in order (each call replaces the previous list).",
            "items": {
                "type": "object",
                "properties": {
                    "content": {"type": "string", "description": "What this step does, in a few words."},
                    "status": {"type": "string", "enum": list(STATUSES)},
                    "priority": {"type": "string", "enum": list(PRIORITIES), "default": "medium"},
                },
                "required": ["content", "status"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["entries"],
    "additionalProperties": False,
}


def validate_entries(arguments: Any) -> list[dict[str, str]]:
    """The plan entries of an ``update_plan`` call, normalised (priority defaults to ``medium``)."""
    if isinstance(arguments, str):
        raise ToolArgsError("invalid arguments for update_plan: not a JSON object")
    entries = arguments.get("entries") if isinstance(arguments, dict) else None
    if not isinstance(entries, list):
        raise ToolArgsError("invalid arguments for update_plan: 'entries' must be a list")
    if len(entries) > MAX_ENTRIES:
        raise ToolArgsError(f"invalid arguments for update_plan: at most {MAX_ENTRIES} entries")
    plan = []
    for index, entry in enumerate(entries):
        where = f"entries.{index}"
        if not isinstance(entry, dict):
            raise ToolArgsError(f"invalid arguments for update_plan: {where} must be an object")
        content, status = entry.get("content"), entry.get("status")
        priority = entry.get("priority", "medium")
        if not isinstance(content, str) or not content.strip():
            raise ToolArgsError(f"invalid arguments for update_plan: {where}.content must be a non-empty string")
        if status not in STATUSES:
            raise ToolArgsError(
                f"invalid arguments for update_plan: {where}.status must be one of {', '.join(STATUSES)}"
            )
        if priority not in PRIORITIES:
            raise ToolArgsError(
                f"invalid arguments for update_plan: {where}.priority must be one of {', '.join(PRIORITIES)}"
            )
        plan.append({"content": content.strip(), "status": status, "priority": priority})
    return plan


async def _update_plan(arguments: Any, execution: ToolExecution) -> str:
    plan = validate_entries(arguments)
    if execution.agent is not None:
        execution.agent.session.append(PLAN_EVENT, {"entries": plan})
    done = sum(1 for entry in plan if entry["status"] == "completed")
    return f"Plan updated ({done} of {len(plan)} done)."


def _present(arguments: Any, cwd: str) -> Any:
    from dsh.services.tools import ToolCard

    return ToolCard(title="Update plan", kind="think")


@plugin("plans", inject=("tools",))
def plans_plugin(ctx: Context, config: object) -> None:
    from dsh.services.tools import ToolDefinition

    ctx.tools.register(
        ToolDefinition(
            "update_plan", PLAN_GUIDANCE, PARAMETERS, _update_plan, meta={"kind": "think", "present": _present}
        )
    )
