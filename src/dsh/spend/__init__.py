"""Spend budgets: dollars and tokens a turn or a session may spend, enforced at step boundaries (RFC 0039).

Not the tool pipeline's output ``budget`` stage (:mod:`dsh.tools`, RFC 0027), which caps how much of a tool's
result the model sees: see ``README.md``.
"""

from dsh.spend._config import BUDGETS, DEFAULT_WARN_AT, SpendConfig
from dsh.spend._ledger import Ledger, Reached, format_amount
from dsh.spend._plugin import (
    BUDGET_CODE,
    LIMITS_EVENT,
    SAID_EVENT,
    STOP_EVENT,
    Spend,
    spend_plugin,
    stop_message,
)

__all__ = [
    "BUDGETS",
    "BUDGET_CODE",
    "DEFAULT_WARN_AT",
    "LIMITS_EVENT",
    "SAID_EVENT",
    "STOP_EVENT",
    "Ledger",
    "Reached",
    "Spend",
    "SpendConfig",
    "format_amount",
    "spend_plugin",
    "stop_message",
]
