"""The plugin kernel: an application, per-plugin contexts, scoped effects and a four-mode event bus.

See ``rfcs/0001-kernel.md`` for the design and what it replaces.
"""

from dsh.kernel._cancel import AbortedError, CancelToken, abortable
from dsh.kernel._context import App, Context, Plugin, ServiceMissingError, plugin
from dsh.kernel._events import EmitEvent, EventBus, EventSpec, Next, ParallelEvent, SerialEvent, WaterfallEvent
from dsh.kernel._scope import Disposer, Scope, ScopeDisposedError, current_scope

__all__ = [
    "AbortedError",
    "CancelToken",
    "App",
    "Context",
    "Disposer",
    "EmitEvent",
    "EventBus",
    "EventSpec",
    "Next",
    "ParallelEvent",
    "Plugin",
    "Scope",
    "ScopeDisposedError",
    "SerialEvent",
    "ServiceMissingError",
    "WaterfallEvent",
    "abortable",
    "current_scope",
    "plugin",
]
