"""The application and the per-plugin context view.

:class:`App` owns the event bus, the service table, the root scope and the task group every scope spawns
into. :class:`Context` is what a plugin receives: the same bus and services, seen through the plugin's own
scope, so everything it registers is disposed with it.

Plugin guarantees:

* A plugin declares the services it *injects*; it is applied once all of them are provided, whatever order
  plugins were listed in. When an injected service is withdrawn, the plugin is disposed and waits again.
* A plugin's set-up runs synchronously with its scope current; an exception during set-up disposes what it
  had registered and propagates to the caller of :meth:`Context.plugin` (or is logged when the plugin was
  applied later, on a service becoming available).
* ``config`` is validated with the plugin's ``Config`` pydantic model when it declares one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Concatenate, Literal, ParamSpec, Protocol, TypeVar, overload

import anyio
import anyio.abc

from dsh._log import get_logger
from dsh.kernel._events import EmitEvent, EventBus, ParallelEvent, SerialEvent, WaterfallEvent
from dsh.kernel._scope import Disposer, Scope

if TYPE_CHECKING:
    from dsh.choices import Choices
    from dsh.commands import CommandRegistry
    from dsh.context import ContextService
    from dsh.mcp import McpManager
    from dsh.policy import Policies
    from dsh.reaper import SessionTags
    from dsh.sandbox import Sandbox
    from dsh.secrets import SecretPolicy
    from dsh.services.agents import AgentRegistry
    from dsh.services.llm import LlmService
    from dsh.services.sessions import SessionPersistence, SessionStore
    from dsh.services.system_prompt import SystemPrompt
    from dsh.services.tools import ToolRegistry
    from dsh.tools import BackgroundCommands, Workspace

__all__ = ["App", "Context", "Plugin", "ServiceMissingError"]

P = ParamSpec("P")
T = TypeVar("T")
R = TypeVar("R")
L = TypeVar("L")
log = get_logger("dsh.kernel")


class ServiceMissingError(AttributeError):
    """A service was read through attribute access but nobody provides it."""


class Plugin(Protocol):
    """Anything callable as ``plugin(ctx, config)``; optional ``name``, ``inject`` and ``Config`` attributes."""

    def __call__(self, ctx: Context, config: Any, /) -> object: ...


@dataclass(eq=False)
class _Runtime:
    plugin: Plugin
    config: Any
    parent: Scope
    name: str
    inject: tuple[str, ...]
    scope: Scope | None = None
    removed: bool = False
    applying: bool = False
    failed: bool = False
    """Set-up raised: stay inert until one of the injected services is withdrawn and provided again."""


def _validated(model: Any, config: Any) -> Any:
    """*config* validated by the plugin's pydantic model. An absent or empty config of a model whose fields
    all have defaults is the default instance, made without building the model's validator: most plugins
    are loaded with no config, and start-up should not pay for validating nothing."""
    if (config is None or config == {}) and not any(f.is_required() for f in model.model_fields.values()):
        return model.model_construct()
    return model.model_validate(config if config is not None else {})


class App:
    """The kernel: enter it (``async with App() as app``) to get a running root :class:`Context`.

    Leaving the block disposes the root scope (and therefore every plugin, LIFO), then closes the task group.
    """

    def __init__(self, name: str = "root") -> None:
        self.bus = EventBus()
        self._services: dict[str, Any] = {}
        self._runtimes: list[_Runtime] = []
        self._task_group: anyio.abc.TaskGroup | None = None
        self._root: Scope | None = None
        self._name = name

    @property
    def ctx(self) -> Context:
        if self._root is None:
            raise RuntimeError("the App is not running: use `async with App() as app`")
        return Context(self, self._root)

    async def __aenter__(self) -> App:
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        self._root = Scope(self._name, task_group=self._task_group)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        assert self._task_group is not None and self._root is not None
        with anyio.CancelScope(shield=True):
            await self._root.dispose()
        self._task_group.cancel_scope.cancel()
        return await self._task_group.__aexit__(exc_type, exc, tb)

    # -- services ---------------------------------------------------------------------------------------

    def _provide(self, scope: Scope, name: str, service: Any) -> Disposer:
        if name in self._services:
            raise ValueError(f"service {name!r} is already provided")
        self._services[name] = service

        async def withdraw() -> None:
            if self._services.get(name) is service:
                del self._services[name]
                for runtime in list(self._runtimes):
                    if name in runtime.inject:
                        runtime.failed = False
                        if runtime.scope is not None:
                            child, runtime.scope = runtime.scope, None
                            await child.dispose()

        disposer = scope.effect(withdraw)
        self._reconcile()
        return disposer

    # -- plugins ----------------------------------------------------------------------------------------

    def _add_plugin(self, parent: Scope, plugin: Plugin, config: Any) -> Disposer:
        name = str(getattr(plugin, "name", None) or getattr(plugin, "__name__", type(plugin).__name__))
        runtime = _Runtime(plugin, config, parent, name, tuple(getattr(plugin, "inject", ())))
        config_model = getattr(plugin, "Config", None)
        if config_model is not None:
            runtime.config = _validated(config_model, config)
        self._runtimes.append(runtime)

        async def remove() -> None:
            runtime.removed = True
            if runtime in self._runtimes:
                self._runtimes.remove(runtime)
            if runtime.scope is not None:
                child, runtime.scope = runtime.scope, None
                await child.dispose()

        disposer = parent.effect(remove)
        if self._ready(runtime):
            self._apply(runtime, raise_errors=True)
        return disposer

    def _ready(self, runtime: _Runtime) -> bool:
        return (
            runtime.scope is None
            and not runtime.removed
            and not runtime.applying
            and not runtime.failed
            and not runtime.parent.disposed
            and all(name in self._services for name in runtime.inject)
        )

    def _apply(self, runtime: _Runtime, *, raise_errors: bool) -> None:
        scope = Scope(runtime.name, task_group=self._task_group, parent=runtime.parent)
        runtime.scope = scope
        runtime.applying = True
        try:
            with scope.active():
                runtime.plugin(Context(self, scope), runtime.config)
        except Exception:
            runtime.scope = None
            runtime.failed = True
            if self._task_group is not None:
                self._task_group.start_soon(scope.dispose)
            if raise_errors:
                runtime.removed = True
                self._runtimes.remove(runtime)
                raise
            log.exception("plugin failed to apply", plugin=runtime.name)
            return
        finally:
            runtime.applying = False
        self._reconcile()

    def _reconcile(self) -> None:
        for runtime in list(self._runtimes):
            if self._ready(runtime):
                self._apply(runtime, raise_errors=False)


class Context:
    """A plugin's view of the application: services, events and its own scope.

    Services are read as attributes (``ctx.sessions``); a missing one raises :class:`ServiceMissingError`,
    while :meth:`get` returns ``None``. Every registration made through a context is owned by its scope.
    """

    __slots__ = ("app", "scope")

    def __init__(self, app: App, scope: Scope) -> None:
        self.app = app
        self.scope = scope

    # -- services ---------------------------------------------------------------------------------------

    # The services other packages look up by name are typed here (RFC 0027): ``ctx.get("policy")`` is a
    # ``Policies | None`` to mypy, so type checking does not stop at the service boundary. A name not listed
    # is ``Any``; the interface services are attributes (``ctx.tools``).
    @overload
    def get(self, name: Literal["workspace"]) -> Workspace | None: ...
    @overload
    def get(self, name: Literal["background_commands"]) -> BackgroundCommands | None: ...
    @overload
    def get(self, name: Literal["policy"]) -> Policies | None: ...
    @overload
    def get(self, name: Literal["context"]) -> ContextService | None: ...
    @overload
    def get(self, name: Literal["choices"]) -> Choices | None: ...
    @overload
    def get(self, name: Literal["sandbox"]) -> Sandbox | None: ...
    @overload
    def get(self, name: Literal["mcp"]) -> McpManager | None: ...
    @overload
    def get(self, name: Literal["commands"]) -> CommandRegistry | None: ...
    @overload
    def get(self, name: Literal["session_persistence"]) -> SessionPersistence | None: ...
    @overload
    def get(self, name: Literal["secret_policy"]) -> SecretPolicy | None: ...
    @overload
    def get(self, name: Literal["reaper"]) -> SessionTags | None: ...
    @overload
    def get(self, name: str) -> Any | None: ...
    def get(self, name: str) -> Any | None:
        """The service provided under *name*, or None when no plugin provides it."""
        return self.app._services.get(name)

    def provide(self, name: str, service: Any) -> Disposer:
        """Provide *service* under *name* for as long as this scope lives; duplicate names are rejected."""
        return self.app._provide(self.scope, name, service)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return self.app._services[name]
        except KeyError:
            raise ServiceMissingError(f"service {name!r} is not provided (is its plugin loaded?)") from None

    if TYPE_CHECKING:
        sessions: SessionStore
        system_prompt: SystemPrompt
        tools: ToolRegistry
        llm: LlmService
        agents: AgentRegistry

    # -- scopes and plugins -----------------------------------------------------------------------------

    def plugin(self, plugin: Plugin, config: Any = None) -> Disposer:
        """Load *plugin* as a child of this scope; it applies once its injected services exist."""
        return self.app._add_plugin(self.scope, plugin, config)

    def effect(self, undo: Callable[[], Awaitable[None] | None]) -> Disposer:
        return self.scope.effect(undo)

    def spawn(self, fn: Callable[..., Awaitable[Any]], *args: Any, name: str | None = None) -> Disposer:
        return self.scope.spawn(fn, *args, name=name)

    def fork(self, name: str) -> Context:
        """A context on a child scope: dispose it with ``await ctx.scope.dispose()``."""
        return Context(self.app, self.scope.child(name))

    # -- events -----------------------------------------------------------------------------------------

    @overload
    def on(self, event: EmitEvent[P], listener: Callable[P, object], *, prepend: bool = ...) -> Disposer: ...
    @overload
    def on(
        self, event: SerialEvent[P], listener: Callable[P, Awaitable[object]], *, prepend: bool = ...
    ) -> Disposer: ...
    @overload
    def on(
        self, event: ParallelEvent[P], listener: Callable[P, Awaitable[object]], *, prepend: bool = ...
    ) -> Disposer: ...
    @overload
    def on(self, event: WaterfallEvent[L, T, R], listener: L, *, prepend: bool = ...) -> Disposer: ...
    def on(self, event: Any, listener: Any, *, prepend: bool = False) -> Disposer:
        """Listen to *event* for as long as this scope lives."""
        return self.scope.effect(self.app.bus.add(event.name, listener, prepend=prepend))

    def emit(self, event: EmitEvent[P], *args: P.args, **_: P.kwargs) -> None:
        self.app.bus.emit(event.name, *args)

    async def serial(self, event: SerialEvent[P], *args: P.args, **_: P.kwargs) -> Any:
        return await self.app.bus.serial(event.name, *args)

    async def parallel(self, event: ParallelEvent[P], *args: P.args, **_: P.kwargs) -> None:
        await self.app.bus.parallel(event.name, *args)

    async def waterfall(self, event: WaterfallEvent[Any, T, R], *args: Any, default: Callable[..., Awaitable[R]]) -> R:
        result: R = await self.app.bus.waterfall(event.name, *args, default=default)
        return result


def plugin(
    name: str, *, inject: Sequence[str] = (), config: type[Any] | None = None
) -> Callable[[Callable[Concatenate[Context, P], object]], Plugin]:
    """Declare a set-up function ``fn(ctx, config)`` as a plugin: its name, injected services, config model."""

    def wrap(fn: Callable[Concatenate[Context, P], object]) -> Plugin:
        setattr(fn, "name", name)  # noqa: B010 - attributes on a function object
        setattr(fn, "inject", tuple(inject))  # noqa: B010
        if config is not None:
            setattr(fn, "Config", config)  # noqa: B010
        return fn

    return wrap
