"""Flat memory for a long-lived daemon: a full garbage collection after sessions close (issue #42 item 3).

Why: a closed session's objects (its events, derived messages, the tasks, closures and exceptions of its turns)
are freed by reference counting only where they form no cycle; the rest is cyclic garbage that waits for a
collection of the oldest generation. With the daemon's tuned thresholds (RFC 0007: a large young generation,
start-up objects frozen) and CPython's rule that a full collection runs only once the objects promoted since the
last one are a quarter of those it kept, a daemon opening and closing sessions all day never ran one: 100
sessions grew 8.6 MiB per minute, and a forced collection freed 90% of the tracked objects.

Guarantees of :func:`memory_plugin`:

* At most one full collection (``gc.collect()``) per ``every`` seconds (default 30), and only when an agent was
  disposed since the last one: an idle daemon, or one whose sessions stay open, never pays for one.
* It runs on the event loop between two steps of other tasks (the collector holds the interpreter either way;
  measured in RFC 0031: tens of milliseconds at 100 live sessions), and is logged at debug level with what it
  freed and how long it took.

Not here: the thresholds and the start-up ``gc.freeze`` (the ACP daemon's ``_tune_gc``), memory the allocator keeps
after objects are freed (arenas with a live object stay mapped; a full collection soon after a close keeps the
freed blocks reusable by the next session instead of letting garbage pile up across arenas).
"""

from __future__ import annotations

import gc
import time
from typing import TYPE_CHECKING, Any

from dsh import events as ev
from dsh._log import get_logger
from dsh.kernel import plugin

if TYPE_CHECKING:
    from dsh.kernel import Context

__all__ = [
    "memory_plugin",
]

DEFAULT_EVERY = 30.0
log = get_logger("dsh.memory")


@plugin("memory")
def memory_plugin(ctx: Context, config: dict[str, Any] | None = None) -> None:
    """Collect cyclic garbage after agents are disposed (see the module docstring). *config*: ``{"every": s}``."""
    import anyio

    every = float((config or {}).get("every", DEFAULT_EVERY))
    disposed = anyio.Event()

    def on_disposed(agent: Any) -> None:
        disposed.set()

    async def collector() -> None:
        nonlocal disposed
        while True:
            await disposed.wait()
            disposed = anyio.Event()
            started = time.perf_counter()
            freed = gc.collect()
            log.debug("full collection", freed=freed, ms=round((time.perf_counter() - started) * 1000, 1))
            await anyio.sleep(every)

    ctx.on(ev.AGENT_DISPOSED, on_disposed)
    ctx.spawn(collector, name="memory-collector")
