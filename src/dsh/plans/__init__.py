"""Plans: the ``update_plan`` tool and its ``plan/update`` session events (see ``README.md``)."""

from dsh.plans._plugin import PLAN_EVENT, PLAN_GUIDANCE, plans_plugin, validate_entries

__all__ = ["PLAN_EVENT", "PLAN_GUIDANCE", "plans_plugin", "validate_entries"]
