"""The system_prompt service: ordered sections, tool schemas and the assemble waterfall."""

from __future__ import annotations

import dataclasses

import pytest

from dsh import events as ev
from dsh.kernel import Context, Next, plugin
from dsh.services.llm import ToolSchema
from dsh.services.system_prompt import (
    PromptAssembly,
    PromptSection,
    SystemPrompt,
    render_prompt,
    system_prompt_plugin,
)
from tests.conftest import Recorder

PLUGINS = (system_prompt_plugin,)
"""What the shared ``ctx`` fixture (``tests/conftest.py``) loads, in order."""


@pytest.fixture
def prompt(ctx: Context) -> SystemPrompt:
    return ctx.system_prompt


def _names(assembly: PromptAssembly) -> list[str]:
    return [section.name for section in assembly.sections]


async def test_sections_are_sorted_by_order_ties_keep_registration_order(prompt: SystemPrompt) -> None:
    prompt.section("c", 20, "C")
    prompt.section("a", 10, "A")
    prompt.section("tie-1", 15, "T1")
    prompt.section("negative", -5, "N")
    prompt.section("tie-2", 15, "T2")
    prompt.section("tie-3", 15, "T3")

    assembly = await prompt.assemble()

    assert _names(assembly) == ["negative", "a", "tie-1", "tie-2", "tie-3", "c"]
    assert assembly.sections[0] == PromptSection("negative", -5, "N")


async def test_callable_text_is_evaluated_at_each_assembly(prompt: SystemPrompt) -> None:
    state = {"n": 0}

    def text() -> str:
        state["n"] += 1
        return f"call {state['n']}"

    prompt.section("dynamic", 0, text)
    assert state["n"] == 0  # not evaluated on registration

    first = await prompt.assemble()
    second = await prompt.assemble()

    assert first.sections[0].text == "call 1"
    assert second.sections[0].text == "call 2"


async def test_change_is_emitted_on_add_and_remove(prompt: SystemPrompt, ctx: Context, recorder: Recorder) -> None:
    ctx.on(ev.SYSTEM_PROMPT_CHANGE, recorder.listener("change"))

    remove = prompt.section("s", 0, "text")
    assert recorder.names() == ["change"]

    await remove()
    assert recorder.names() == ["change", "change"]
    assert _names(await prompt.assemble()) == []

    await remove()  # idempotent: no second removal event
    assert recorder.names() == ["change", "change"]


async def test_section_is_removed_when_owning_plugin_scope_is_disposed(prompt: SystemPrompt, ctx: Context) -> None:
    @plugin("contributor", inject=("system_prompt",))
    def contributor(pctx: Context, config: object) -> None:
        pctx.system_prompt.section("mine", 0, "from plugin")
        pctx.system_prompt.tools(lambda: [{"name": "t", "description": "d", "parameters": {}}])

    prompt.section("root", 1, "from root")
    dispose = ctx.plugin(contributor)
    before = await prompt.assemble()
    assert _names(before) == ["mine", "root"]
    assert [tool["name"] for tool in before.tools] == ["t"]

    await dispose()

    after = await prompt.assemble()
    assert _names(after) == ["root"]
    assert after.tools == []


async def test_tool_schemas_are_collected_and_deep_copied(prompt: SystemPrompt) -> None:
    registry: list[ToolSchema] = [
        {"name": "a", "description": "A", "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}},
    ]
    prompt.tools(lambda: registry)
    prompt.tools(lambda: [{"name": "b", "description": "B", "parameters": {}, "strict": True}])

    assembly = await prompt.assemble()
    assert [tool["name"] for tool in assembly.tools] == ["a", "b"]
    assert assembly.tools[1]["strict"] is True

    assembly.tools[0]["parameters"]["properties"]["x"]["type"] = "integer"
    assembly.tools[0]["name"] = "renamed"

    assert registry[0]["parameters"]["properties"]["x"]["type"] == "string"
    assert registry[0]["name"] == "a"


async def test_tool_provider_disposer_removes_it(prompt: SystemPrompt) -> None:
    remove = prompt.tools(lambda: [{"name": "a", "description": "", "parameters": {}}])
    await remove()
    assert (await prompt.assemble()).tools == []


async def test_assemble_waterfall_may_rewrite_the_assembly(prompt: SystemPrompt, ctx: Context) -> None:
    prompt.section("keep", 0, "keep")
    prompt.section("drop", 1, "drop")
    prompt.tools(lambda: [{"name": "t", "description": "", "parameters": {}}])

    async def rewrite(assembly: PromptAssembly, next_: Next[PromptAssembly, PromptAssembly]) -> PromptAssembly:
        kept = [s for s in assembly.sections if s.name != "drop"]
        added = [*kept, PromptSection("added", 99, "added by listener")]
        return await next_(dataclasses.replace(assembly, sections=added))

    async def post(assembly: PromptAssembly, next_: Next[PromptAssembly, PromptAssembly]) -> PromptAssembly:
        result = await next_()
        result.tools.append({"name": "late", "description": "", "parameters": {}})
        return result

    listeners = ctx.fork("listeners")
    listeners.on(ev.SYSTEM_PROMPT_ASSEMBLE, rewrite)
    listeners.on(ev.SYSTEM_PROMPT_ASSEMBLE, post)

    assembly = await prompt.assemble()
    assert _names(assembly) == ["keep", "added"]
    assert [tool["name"] for tool in assembly.tools] == ["t", "late"]

    # The rewrite did not touch the registry.
    await listeners.scope.dispose()
    plain = await prompt.assemble()
    assert _names(plain) == ["keep", "drop"]
    assert [tool["name"] for tool in plain.tools] == ["t"]


async def test_assemble_waterfall_may_short_circuit(prompt: SystemPrompt, ctx: Context) -> None:
    prompt.section("ignored", 0, "ignored")
    replacement = PromptAssembly(sections=[PromptSection("only", 0, "only")])

    async def replace(assembly: PromptAssembly, next_: Next[PromptAssembly, PromptAssembly]) -> PromptAssembly:
        return replacement

    ctx.on(ev.SYSTEM_PROMPT_ASSEMBLE, replace)
    assert await prompt.assemble() is replacement


def test_render_prompt_joins_non_empty_texts_with_a_blank_line() -> None:
    assembly = PromptAssembly(
        sections=[
            PromptSection("a", 0, "first"),
            PromptSection("empty", 1, ""),
            PromptSection("b", 2, "second\nline"),
            PromptSection("c", 3, "third"),
        ]
    )
    assert render_prompt(assembly) == "first\n\nsecond\nline\n\nthird"
    assert render_prompt(PromptAssembly()) == ""
    assert render_prompt(PromptAssembly(sections=[PromptSection("e", 0, "")])) == ""


async def test_render_of_assembled_sections_follows_order(prompt: SystemPrompt) -> None:
    prompt.section("second", 2, "two")
    prompt.section("empty", 1, lambda: "")
    prompt.section("first", 0, "one")
    assert render_prompt(await prompt.assemble()) == "one\n\ntwo"
