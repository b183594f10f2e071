"""The ``commands`` service: registration owned by the plugin's scope, ``commands/change``, names."""

from __future__ import annotations

import pytest

from dsh import events as ev
from dsh.commands import CommandResult, Invocation, commands_plugin
from dsh.kernel import App, Context, plugin


async def _noop(invocation: Invocation) -> CommandResult:
    return CommandResult(text="")


async def test_a_command_lives_as_long_as_the_plugin_that_registered_it() -> None:
    changes: list[str] = []

    @plugin("adds_a_command", inject=("commands",))
    def adds(ctx: Context, config: object) -> None:
        ctx.commands.register("mine", "Mine", _noop)

    async with App() as app:
        app.ctx.plugin(commands_plugin)
        app.ctx.on(ev.COMMANDS_CHANGE, lambda: changes.append("change"))
        dispose = app.ctx.plugin(adds)
        assert [c.name for c in app.ctx.commands.all()] == ["mine"]
        assert changes == ["change"]
        await dispose()
        assert app.ctx.commands.all() == []
        assert changes == ["change", "change"]


@pytest.mark.parametrize("name", ["", "has space", "/slash", "x" * 65, "ümlaut"])
async def test_a_command_name_is_checked(name: str) -> None:
    async with App() as app:
        app.ctx.plugin(commands_plugin)
        with pytest.raises(ValueError, match="invalid command name"):
            app.ctx.commands.register(name, "bad", _noop)


async def test_a_name_is_registered_once() -> None:
    async with App() as app:
        app.ctx.plugin(commands_plugin)
        app.ctx.commands.register("once", "first", _noop)
        with pytest.raises(ValueError, match="already registered"):
            app.ctx.commands.register("once", "second", _noop)
