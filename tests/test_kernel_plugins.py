"""Plugins and services: ``Context.plugin``, ``@plugin``, ``provide``/``get`` and App lifetime (``dsh.kernel._context``)."""

from __future__ import annotations

import anyio
import pydantic
import pytest
from structlog.testing import capture_logs

from dsh.kernel import App, Context, EmitEvent, Scope, ServiceMissingError, plugin

PING: EmitEvent[[str]] = EmitEvent("test/ping")


def _provider(name: str, service: object) -> object:
    @plugin(f"provide-{name}")
    def provide(ctx: Context, config: object) -> None:
        ctx.provide(name, service)

    return provide


# -- services -----------------------------------------------------------------------------------------------


async def test_get_returns_none_when_absent_and_service_when_provided(app: App) -> None:
    assert app.ctx.get("thing") is None
    service = object()
    app.ctx.provide("thing", service)
    assert app.ctx.get("thing") is service
    assert app.ctx.thing is service


async def test_attribute_access_to_missing_service_raises_service_missing_error(app: App) -> None:
    with pytest.raises(ServiceMissingError, match="'nothing'"):
        _ = app.ctx.nothing
    assert issubclass(ServiceMissingError, AttributeError)
    assert getattr(app.ctx, "nothing", "fallback") == "fallback"  # AttributeError semantics


async def test_duplicate_provide_is_rejected_and_keeps_the_first(app: App) -> None:
    first, second = object(), object()
    app.ctx.provide("thing", first)
    with pytest.raises(ValueError, match="already provided"):
        app.ctx.fork("other").provide("thing", second)
    assert app.ctx.get("thing") is first


async def test_provide_disposer_withdraws_service_and_allows_reprovide(app: App) -> None:
    withdraw = app.ctx.provide("thing", 1)
    await withdraw()
    assert app.ctx.get("thing") is None
    app.ctx.provide("thing", 2)
    assert app.ctx.get("thing") == 2


async def test_service_is_withdrawn_when_providing_scope_is_disposed(app: App) -> None:
    ctx = app.ctx.fork("owner")
    ctx.provide("thing", 1)
    await ctx.scope.dispose()
    assert app.ctx.get("thing") is None


# -- the @plugin decorator ----------------------------------------------------------------------------------


def test_plugin_decorator_sets_name_inject_and_config() -> None:
    class Config(pydantic.BaseModel):
        level: int = 1

    @plugin("decorated", inject=["a", "b"], config=Config)
    def decorated(ctx: Context, config: Config) -> None:
        pass

    assert decorated.name == "decorated"  # type: ignore[attr-defined]
    assert decorated.inject == ("a", "b")  # type: ignore[attr-defined]
    assert decorated.Config is Config  # type: ignore[attr-defined]


async def test_plain_function_is_a_plugin_named_after_it(app: App) -> None:
    seen: list[tuple[str, object]] = []

    def bare_plugin(ctx: Context, config: object) -> None:
        seen.append((ctx.scope.name, config))

    app.ctx.plugin(bare_plugin, {"x": 1})
    assert seen == [("bare_plugin", {"x": 1})]


# -- applying ----------------------------------------------------------------------------------------------


async def test_plugin_without_injections_applies_immediately(app: App) -> None:
    applied: list[str] = []

    @plugin("now")
    def now(ctx: Context, config: object) -> None:
        applied.append("now")

    app.ctx.plugin(now)
    assert applied == ["now"]


async def test_dependent_loaded_before_provider_applies_once_service_is_provided(app: App) -> None:
    applied: list[object] = []

    @plugin("dependent", inject=("a", "b"))
    def dependent(ctx: Context, config: object) -> None:
        applied.append((ctx.a, ctx.b))

    app.ctx.plugin(dependent)
    assert applied == []
    app.ctx.plugin(_provider("a", "A"))  # type: ignore[arg-type]
    assert applied == []  # still waiting for b
    app.ctx.plugin(_provider("b", "B"))  # type: ignore[arg-type]
    assert applied == [("A", "B")]


async def test_dependent_loaded_after_provider_applies_immediately(app: App) -> None:
    applied: list[object] = []

    @plugin("dependent", inject=("a",))
    def dependent(ctx: Context, config: object) -> None:
        applied.append(ctx.a)

    app.ctx.plugin(_provider("a", "A"))  # type: ignore[arg-type]
    app.ctx.plugin(dependent)
    assert applied == ["A"]


async def test_chain_of_dependencies_resolves_in_any_load_order(app: App) -> None:
    order: list[str] = []

    @plugin("c", inject=("b",))
    def c(ctx: Context, config: object) -> None:
        order.append("c")

    @plugin("b", inject=("a",))
    def b(ctx: Context, config: object) -> None:
        order.append("b")
        ctx.provide("b", "B")

    @plugin("a")
    def a(ctx: Context, config: object) -> None:
        order.append("a")
        ctx.provide("a", "A")

    app.ctx.plugin(c)
    app.ctx.plugin(b)
    assert order == []
    app.ctx.plugin(a)
    assert order == ["a", "b", "c"]


async def test_withdrawing_a_service_disposes_dependents_and_reprovide_reapplies(app: App) -> None:
    log: list[str] = []

    @plugin("dependent", inject=("a",))
    def dependent(ctx: Context, config: object) -> None:
        log.append(f"apply:{ctx.a}")
        ctx.effect(lambda: log.append("dispose"))
        ctx.on(PING, lambda s: log.append(f"ping:{s}"))

    app.ctx.plugin(dependent)
    withdraw = app.ctx.provide("a", 1)
    assert log == ["apply:1"]
    app.ctx.emit(PING, "x")

    await withdraw()
    assert log == ["apply:1", "ping:x", "dispose"]
    app.ctx.emit(PING, "ignored")  # the dependent's listener is gone
    assert log == ["apply:1", "ping:x", "dispose"]

    app.ctx.provide("a", 2)
    app.ctx.emit(PING, "y")
    assert log == ["apply:1", "ping:x", "dispose", "apply:2", "ping:y"]


async def test_plugin_disposer_removes_its_listeners_and_services(app: App) -> None:
    heard: list[str] = []

    @plugin("owner")
    def owner(ctx: Context, config: object) -> None:
        ctx.provide("owned", "service")
        ctx.on(PING, heard.append)

    dispose = app.ctx.plugin(owner)
    app.ctx.emit(PING, "before")
    assert app.ctx.get("owned") == "service"

    await dispose()

    app.ctx.emit(PING, "after")
    assert heard == ["before"]
    assert app.ctx.get("owned") is None


async def test_removed_plugin_is_not_applied_when_its_service_appears_later(app: App) -> None:
    applied: list[str] = []

    @plugin("waiting", inject=("a",))
    def waiting(ctx: Context, config: object) -> None:
        applied.append("waiting")

    dispose = app.ctx.plugin(waiting)
    await dispose()
    app.ctx.provide("a", 1)
    assert applied == []


async def test_disposing_the_parent_context_disposes_plugins_loaded_through_it(app: App) -> None:
    log: list[str] = []

    @plugin("inner")
    def inner(ctx: Context, config: object) -> None:
        ctx.effect(lambda: log.append("inner disposed"))

    parent = app.ctx.fork("parent")
    parent.plugin(inner)
    await parent.scope.dispose()
    assert log == ["inner disposed"]


async def test_plugin_loaded_in_a_disposed_scope_is_not_applied_on_reconcile(app: App) -> None:
    applied: list[str] = []

    @plugin("waiting", inject=("a",))
    def waiting(ctx: Context, config: object) -> None:
        applied.append("waiting")

    parent = app.ctx.fork("parent")
    parent.plugin(waiting)
    await parent.scope.dispose()
    app.ctx.provide("a", 1)
    assert applied == []


# -- set-up failures ----------------------------------------------------------------------------------------


async def test_set_up_exception_propagates_and_disposes_what_it_registered(app: App) -> None:
    disposed = anyio.Event()
    heard: list[str] = []

    @plugin("broken")
    def broken(ctx: Context, config: object) -> None:
        ctx.on(PING, heard.append)
        ctx.effect(disposed.set)
        raise RuntimeError("set-up failed")

    with pytest.raises(RuntimeError, match="set-up failed"):
        app.ctx.plugin(broken)

    with anyio.fail_after(1):
        await disposed.wait()
    app.ctx.emit(PING, "after")
    assert heard == []


async def test_plugin_that_raised_from_context_plugin_is_not_reapplied_later(app: App) -> None:
    attempts: list[str] = []

    @plugin("broken")
    def broken(ctx: Context, config: object) -> None:
        attempts.append("set-up")
        raise RuntimeError("set-up failed")

    with pytest.raises(RuntimeError):
        app.ctx.plugin(broken)

    with capture_logs():
        app.ctx.provide("unrelated", 1)  # a reconcile must not retry the failed plugin
    assert attempts == ["set-up"]


async def test_deferred_set_up_failure_is_logged_once_not_raised(app: App) -> None:
    attempts: list[str] = []

    @plugin("broken-later", inject=("a",))
    def broken_later(ctx: Context, config: object) -> None:
        attempts.append("set-up")
        raise RuntimeError("set-up failed")

    app.ctx.plugin(broken_later)
    with capture_logs() as logs:
        app.ctx.provide("a", 1)  # the failure is logged, not raised to the provider

    assert attempts == ["set-up"]
    failures = [entry for entry in logs if entry["event"] == "plugin failed to apply"]
    assert [entry["plugin"] for entry in failures] == ["broken-later"]


async def test_deferred_set_up_failure_is_logged_with_the_plugin_name(
    app: App,
) -> None:
    """The first failing attempt is logged with the plugin name (retries are covered by the test above)."""
    attempts: list[str] = []

    @plugin("broken-later", inject=("a",))
    def broken_later(ctx: Context, config: object) -> None:
        attempts.append("set-up")
        if len(attempts) == 1:
            raise RuntimeError("set-up failed")

    app.ctx.plugin(broken_later)
    with capture_logs() as logs:
        app.ctx.provide("a", 1)

    failures = [entry for entry in logs if entry["event"] == "plugin failed to apply"]
    assert failures[0]["plugin"] == "broken-later"
    assert failures[0]["log_level"] == "error"


# -- config -------------------------------------------------------------------------------------------------


class _Config(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    count: int
    label: str = "default"


async def test_config_is_validated_into_the_model(app: App) -> None:
    seen: list[_Config] = []

    @plugin("configured", config=_Config)
    def configured(ctx: Context, config: _Config) -> None:
        seen.append(config)

    app.ctx.plugin(configured, {"count": "3"})
    assert seen == [_Config(count=3, label="default")]
    assert isinstance(seen[0], _Config)


async def test_bad_config_raises_validation_error_and_plugin_is_not_applied(app: App) -> None:
    applied: list[object] = []

    @plugin("configured", config=_Config)
    def configured(ctx: Context, config: _Config) -> None:
        applied.append(config)

    with pytest.raises(pydantic.ValidationError):
        app.ctx.plugin(configured, {"count": "not a number"})
    with pytest.raises(pydantic.ValidationError):
        app.ctx.plugin(configured, {"count": 1, "unknown": True})
    with pytest.raises(pydantic.ValidationError):
        app.ctx.plugin(configured)  # None config validates as {} and count is required

    app.ctx.provide("anything", 1)  # a reconcile must not apply the rejected plugins
    assert applied == []


async def test_config_none_validates_as_empty_mapping(app: App) -> None:
    class Optional(pydantic.BaseModel):
        flag: bool = True

    seen: list[Optional] = []

    @plugin("defaults", config=Optional)
    def defaults(ctx: Context, config: Optional) -> None:
        seen.append(config)

    app.ctx.plugin(defaults)
    assert seen == [Optional(flag=True)]


# -- App lifetime -------------------------------------------------------------------------------------------


async def test_app_exit_disposes_every_plugin_lifo_and_stops_tasks() -> None:
    log: list[str] = []
    started = anyio.Event()

    async def forever() -> None:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            log.append("task stopped")

    @plugin("first")
    def first(ctx: Context, config: object) -> None:
        ctx.effect(lambda: log.append("first disposed"))
        ctx.provide("service", 1)

    @plugin("second", inject=("service",))
    def second(ctx: Context, config: object) -> None:
        ctx.effect(lambda: log.append("second disposed"))
        ctx.spawn(forever)

    with anyio.fail_after(1):
        async with App() as app:
            app.ctx.plugin(first)
            app.ctx.plugin(second)
            await started.wait()
            assert log == []

    assert log == ["task stopped", "second disposed", "first disposed"]
    assert app.ctx.get("service") is None


async def test_app_ctx_outside_async_with_raises() -> None:
    with pytest.raises(RuntimeError, match="not running"):
        _ = App().ctx


async def test_context_effect_and_spawn_are_owned_by_the_context_scope(app: App) -> None:
    ctx = app.ctx.fork("owner")
    started = anyio.Event()
    stopped: list[str] = []

    async def task() -> None:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            stopped.append("task")

    ctx.effect(lambda: stopped.append("effect"))
    ctx.spawn(task)
    with anyio.fail_after(1):
        await started.wait()
        await ctx.scope.dispose()
    assert stopped == ["task", "effect"]


async def test_plugin_context_scope_parent_is_the_loading_scope(app: App) -> None:
    scopes: list[Scope] = []

    @plugin("child")
    def child(ctx: Context, config: object) -> None:
        scopes.append(ctx.scope)

    parent = app.ctx.fork("parent")
    parent.plugin(child)
    assert scopes[0].parent is parent.scope
