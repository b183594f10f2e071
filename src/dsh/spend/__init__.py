"""Spend budgets: dollars and tokens a turn or a session may spend, enforced at step boundaries (RFC 0039).

Not the tool pipeline's output ``budget`` stage (:mod:`dsh.tools`, RFC 0027), which caps how much of a tool's
result the model sees: see ``README.md``.
"""

from dsh.spend._config import SpendConfig
from dsh.spend._plugin import spend_plugin

__all__ = [
    "SpendConfig",
    "spend_plugin",
]
