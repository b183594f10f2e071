"""In the application: ``run_command`` children do not get the keys, and every tool result leaves
``tools/execute`` redacted (content, error and display; also when a tool raises)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from dsh import events as ev
from dsh.app import load_core
from dsh.kernel import App, Context, Next
from dsh.secrets import SecretsConfig, current_policy
from dsh.services.tools import ToolExecution, ToolResult, define_tool
from tests.tools.conftest import FakeAgent

KEY = "sk-test-key-0123456789abcdef"
PASSED = "passed-value-0123456789"


def text(result: ToolResult) -> str:
    return "".join(block["text"] for block in result.content if block["type"] == "text")


async def execute(ctx: Context, name: str, arguments: object, cwd: Path) -> ToolResult:
    with anyio.fail_after(20):
        result: ToolResult = await ctx.tools.execute(ToolExecution("c1", name, arguments, FakeAgent.at(cwd)))  # type: ignore[arg-type]
    return result


async def test_run_command_children_do_not_see_keys_and_output_is_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("WEATHER_API_KEY", PASSED)
    monkeypatch.setenv("ORDINARY_VARIABLE", "ordinary")
    (tmp_path / ".env").write_text(f"OPENAI_API_KEY={KEY}\n", encoding="utf-8")
    async with App() as app:
        load_core(  # the tools run unattended here (no policy): what is tested is what they see and return
            app.ctx, secrets=SecretsConfig(remove=["*_API_KEY"], pass_through=["WEATHER_API_KEY"]), policy=False
        )
        listed = await execute(app.ctx, "run_command", {"command": "env"}, tmp_path)
        assert "OPENAI_API_KEY" not in text(listed)
        assert KEY not in text(listed)
        assert "ORDINARY_VARIABLE=ordinary\n" in text(listed)
        assert f"WEATHER_API_KEY={PASSED}\n" in text(listed)

        printed = await execute(app.ctx, "run_command", {"command": 'cat .env; echo "[$OPENAI_API_KEY]"'}, tmp_path)
        assert text(printed) == "OPENAI_API_KEY=[redacted OPENAI_API_KEY]\n[]\n[exit code: 0]"
        read = await execute(app.ctx, "read_file", {"path": ".env"}, tmp_path)
        assert KEY not in text(read)
        assert "[redacted OPENAI_API_KEY]" in text(read)
        service = app.ctx.get("secret_policy")
        assert service is not None and service.pass_through == frozenset({"WEATHER_API_KEY"})
        assert current_policy().pass_through == frozenset(), "outside a tool call no application's policy is in force"
    # the application's policy is gone with it
    assert app.ctx.get("secret_policy") is None


async def test_errors_and_display_of_any_tool_are_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    from pydantic import BaseModel

    class Args(BaseModel):
        pass

    async def leaky(args: Args, execution: ToolExecution) -> str:
        raise RuntimeError(f"failed with key {KEY}")

    async def with_display(execution: ToolExecution, next_: Next[ToolExecution, ToolResult]) -> ToolResult:
        result = await next_()
        if execution.name == "show":
            return ToolResult(result.call_id, result.content, display={"diff": f"+{KEY}", KEY: [KEY]})
        return result

    async with App() as app:
        load_core(app.ctx, policy=False)
        app.ctx.tools.register(define_tool("leaky", "raises with the key", Args, leaky))

        async def show(args: Args, execution: ToolExecution) -> str:
            return f"key={KEY}"

        app.ctx.tools.register(define_tool("show", "shows the key", Args, show))
        app.ctx.on(ev.TOOLS_EXECUTE, with_display)
        failed = await execute(app.ctx, "leaky", {}, tmp_path)
        assert failed.is_error
        assert text(failed) == "Error: failed with key [redacted ANTHROPIC_API_KEY]"
        shown = await execute(app.ctx, "show", {}, tmp_path)
        assert text(shown) == "key=[redacted ANTHROPIC_API_KEY]"
        assert shown.display == {
            "diff": "+[redacted ANTHROPIC_API_KEY]",
            "[redacted ANTHROPIC_API_KEY]": ["[redacted ANTHROPIC_API_KEY]"],
        }
