"""dsh.context: what the model is told besides the conversation, and keeping the conversation inside the window.

See ``README.md`` in this package (and ``rfcs/0014-context.md``)."""

from dsh.context._config import CompactionConfig, ContextConfig, SectionOverrides, context_from_file
from dsh.context._notes import SESSION_NOTE_OPENING
from dsh.context._plugin import ContextService, context_plugin
from dsh.context._usage import usage_update

__all__ = [
    "CompactionConfig",
    "ContextConfig",
    "ContextService",
    "SESSION_NOTE_OPENING",
    "SectionOverrides",
    "context_from_file",
    "context_plugin",
    "usage_update",
]
