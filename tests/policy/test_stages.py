"""The declared tool call pipeline (issue #41 item 1, RFC 0027): named stages in one fixed order, every package
in its stage whatever order the plugins were loaded in, the budget once per call, and a spilled file that never
holds a secret.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from dsh.kernel import App, Context, Next
from dsh.services.tools import STAGES, Stage, ToolDefinition, ToolExecution, ToolResult, define_tool

SRC = Path(__file__).resolve().parents[2] / "src" / "dsh"
KEY = "sk-stage-test-0123456789abcdef0123"


@dataclass
class _Header:
    cwd: str


@dataclass
class _Session:
    """What the stages read of a session: its id, its cwd, ``append`` (recorded) and ``last``."""

    header: _Header
    id: str = "session-1"
    events: list[tuple[str, Any]] = field(default_factory=list)

    def append(self, kind: str, data: Any) -> None:
        self.events.append((kind, data))

    def last(self, kind: str) -> None:
        return None


@dataclass
class _Agent:
    session: _Session


class _Args(BaseModel):
    pass


def _tool(name: str, body: Callable[[], str], kind: str = "read") -> ToolDefinition:
    async def run(args: _Args, execution: ToolExecution) -> str:
        return body()

    tool = define_tool(name, f"the {name} test tool", _Args, run)
    return ToolDefinition(tool.name, tool.description, tool.parameters, tool.execute, meta={"kind": kind})


async def _execute(ctx: Context, name: str, cwd: Path) -> ToolResult:
    agent = _Agent(_Session(_Header(str(cwd))))
    with anyio.fail_after(30):  # hang detection only
        result: ToolResult = await ctx.tools.execute(ToolExecution("c1", name, {}, agent))  # type: ignore[arg-type]
    return result


def test_the_stages_have_one_fixed_order() -> None:
    assert STAGES == (
        "budget",
        "redact",
        "limits",
        "prepare",
        "decide",
        "ask",
        "checkpoint",
        "diagnose",
        "contain",
        "apply",
    )


def _package_of(step: Any) -> str:
    module = getattr(step, "__module__", "") or ""
    if module == "functools":  # a partial
        module = step.func.__module__
    return ".".join(module.split(".")[:2])


async def test_every_package_sits_in_its_stage() -> None:
    from dsh.app import load_core

    async with App() as app:
        load_core(app.ctx)
        placed = [(stage, _package_of(step)) for stage, step in app.ctx.tools.stages()]
    assert placed == [
        ("budget", "dsh.tools"),
        ("redact", "dsh.secrets"),
        ("limits", "dsh.spend"),  # a spent budget refuses the call first (dsh.spend, RFC 0039)
        ("limits", "dsh.subagents"),
        ("limits", "dsh.skills"),
        ("prepare", "dsh.policy"),
        ("decide", "dsh.policy"),
        ("decide", "dsh.hooks"),  # PreToolUse after the policy's verdict (dsh.hooks injects the policy)
        ("ask", "dsh.policy"),
        ("checkpoint", "dsh.checkpoints"),
        ("checkpoint", "dsh.checkpoints"),  # the checkpoint, then the large edit's display shrink inside it
        ("contain", "dsh.reaper"),
        ("contain", "dsh.sandbox"),
        ("apply", "dsh.tools"),
    ]


async def test_a_call_meets_the_stages_in_their_order_whatever_the_registration_order(tmp_path: Path) -> None:
    seen: list[str] = []

    def recording(stage: Stage) -> Callable[[ToolExecution, Next[ToolExecution, ToolResult]], Any]:
        async def step(execution: ToolExecution, next_: Next[ToolExecution, ToolResult]) -> ToolResult:
            seen.append(f"in:{stage}")
            result = await next_()
            seen.append(f"out:{stage}")
            return result

        return step

    async with App() as app:
        _loaders("UNUSED")["services"](app.ctx)  # the registry alone: every stage empty
        for stage in reversed(STAGES):  # registered innermost first: the order comes from the stages alone
            app.ctx.tools.stage(stage, recording(stage))
        app.ctx.tools.register(_tool("probe", lambda: "ok"))
        result = await _execute(app.ctx, "probe", tmp_path)
    assert not result.is_error, result
    assert seen == [f"in:{stage}" for stage in STAGES] + [f"out:{stage}" for stage in reversed(STAGES)]


async def test_the_decision_says_whether_anyone_was_asked(tmp_path: Path) -> None:
    from dsh.app import load_core

    decisions: list[Any] = []

    async def contain(execution: ToolExecution, next_: Next[ToolExecution, ToolResult]) -> ToolResult:
        decisions.append(execution.decision)
        return await next_()

    async with App() as app:
        load_core(app.ctx)
        app.ctx.tools.stage("contain", contain)
        app.ctx.tools.register(_tool("probe", lambda: "ok"))
        await _execute(app.ctx, "probe", tmp_path)
    assert len(decisions) == 1 and decisions[0] is not None
    assert decisions[0].asked is False and decisions[0].choice is None


async def test_the_budget_stage_holds_one_step_and_a_removed_step_is_gone(app: App) -> None:
    from dsh.app import load_core

    load_core(app.ctx)

    async def other(execution: ToolExecution, next_: Next[ToolExecution, ToolResult]) -> ToolResult:
        return await next_()

    with pytest.raises(ValueError, match="budget"):
        app.ctx.tools.stage("budget", other)
    with pytest.raises(ValueError, match="unknown"):
        app.ctx.tools.stage("sandbox", other)  # type: ignore[arg-type]
    before = len(app.ctx.tools.stages())
    remove = app.ctx.tools.stage("contain", other)
    assert len(app.ctx.tools.stages()) == before + 1
    await remove()
    assert len(app.ctx.tools.stages()) == before


def test_no_package_prepends_to_the_tools_execute_waterfall() -> None:
    """Only the stages wrap a call: ``tools/execute`` is left to what runs a tool (the MCP manager)."""

    def listens(node: ast.AST) -> bool:
        return (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "on"
            and bool(node.args)
            and isinstance(node.args[0], ast.Attribute)
            and node.args[0].attr == "TOOLS_EXECUTE"
        )

    listeners = [
        str(path.relative_to(SRC))
        for path in sorted(SRC.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if listens(node)
    ]
    assert listeners == ["mcp/_manager.py"]


def _loaders(secret_env: str) -> dict[str, Callable[[Context], None]]:
    from dsh.policy import policy_plugin
    from dsh.reaper import reaper_plugin
    from dsh.secrets import SecretsConfig, secrets_plugin
    from dsh.services.agents import agents_plugin
    from dsh.services.llm import llm_plugin
    from dsh.services.sessions import sessions_plugin
    from dsh.services.system_prompt import system_prompt_plugin
    from dsh.services.tools import tools_plugin
    from dsh.tools import builtin_tools_plugin

    def services(ctx: Context) -> None:
        for one in (tools_plugin, llm_plugin, agents_plugin, sessions_plugin, system_prompt_plugin):
            ctx.plugin(one)

    return {
        "services": services,
        "secrets": lambda ctx: ctx.plugin(secrets_plugin, {"secrets": SecretsConfig(remove=[secret_env])}),
        "tools": lambda ctx: ctx.plugin(builtin_tools_plugin, {"data_dir": None}),
        "policy": lambda ctx: ctx.plugin(policy_plugin, None),
        "reaper": lambda ctx: ctx.plugin(reaper_plugin),
    }


async def test_a_spilled_file_never_holds_a_secret_whatever_the_plugin_load_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STAGE_TEST_API_KEY", KEY)
    loaders = _loaders("STAGE_TEST_API_KEY")
    orders = list(itertools.permutations(loaders))
    assert len(orders) == 120
    big = f"start {KEY}\n" + "line of output\n" * 5_000 + f"end {KEY}\n"
    for order in orders:
        async with App() as app:
            for name in order:
                loaders[name](app.ctx)
            app.ctx.tools.register(_tool("leak", lambda: big))
            result = await _execute(app.ctx, "leak", tmp_path)
            shown = "".join(block.get("text", "") for block in result.content)
            assert result.spill is not None, order
            spilled = await anyio.Path(result.spill).read_text(encoding="utf-8")
        assert KEY not in spilled, order
        assert "[redacted STAGE_TEST_API_KEY]" in spilled, order
        assert KEY not in shown, order
