"""Plans: the ``update_plan`` tool and its ``plan/update`` session events (see ``README.md``)."""

from dsh.plans._plugin import PLAN_DOCUMENT_EVENT, PLAN_MODE_PLAN, plans_plugin

__all__ = [
    "PLAN_DOCUMENT_EVENT",
    "PLAN_MODE_PLAN",
    "plans_plugin",
]
