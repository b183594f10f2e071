"""The tools service: registry, schemas and the ``tools/execute`` seam (``dsh.services.tools``)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pydantic
import pytest

from dsh import events as ev
from dsh.kernel import App, Context, Next, plugin
from dsh.services.llm import ContentBlock
from dsh.services.system_prompt import system_prompt_plugin
from dsh.services.tools import (
    ToolDefinition,
    ToolExecution,
    ToolRegistry,
    ToolResult,
    define_tool,
    tools_plugin,
)
from tests.conftest import Recorder

NextFn = Next[ToolExecution, ToolResult]


PLUGINS = (tools_plugin, system_prompt_plugin)  # tools first: it waits for system_prompt
"""What the shared ``ctx`` fixture (``tests/conftest.py``) loads, in order."""


@pytest.fixture
def tools(ctx: Context) -> ToolRegistry:
    return ctx.tools


def _tool(name: str, output: Any = "ok", calls: list[Any] | None = None, **kwargs: Any) -> ToolDefinition:
    async def execute(arguments: Any, execution: ToolExecution) -> Any:
        if calls is not None:
            calls.append(arguments)
        return output

    return ToolDefinition(
        name=name,
        description=f"the {name} tool",
        parameters={"type": "object", "properties": {}},
        execute=execute,
        **kwargs,
    )


def _call(name: str, arguments: Any = None, call_id: str = "c1") -> ToolExecution:
    return ToolExecution(call_id=call_id, name=name, arguments=arguments if arguments is not None else {})


def _text(result: ToolResult) -> str:
    return "".join(block["text"] for block in result.content if block["type"] == "text")


# -- registry -----------------------------------------------------------------------------------------------


async def test_register_get_all_and_change_event(tools: ToolRegistry, ctx: Context, recorder: Recorder) -> None:
    ctx.on(ev.TOOLS_CHANGE, recorder.listener("change"))
    tool = _tool("read")

    remove = tools.register(tool)
    assert recorder.names() == ["change"]
    assert tools.get("read") is tool
    assert tools.all() == [tool]

    await remove()
    assert recorder.names() == ["change", "change"]
    assert tools.get("read") is None
    await remove()
    assert recorder.names() == ["change", "change"]


async def test_duplicate_name_is_rejected(tools: ToolRegistry, ctx: Context, recorder: Recorder) -> None:
    first = _tool("read")
    tools.register(first)
    ctx.on(ev.TOOLS_CHANGE, recorder.listener("change"))
    with pytest.raises(ValueError, match="already registered"):
        tools.register(_tool("read"))
    assert tools.get("read") is first
    assert recorder.calls == []


async def test_schemas_expose_only_model_facing_keys(tools: ToolRegistry) -> None:
    tools.register(_tool("plain", meta={"secret": "not for the model"}))
    tools.register(_tool("strict", strict=True))
    tools.register(_tool("loose", strict=False))

    schemas = tools.schemas()

    assert schemas[0] == {
        "name": "plain",
        "description": "the plain tool",
        "parameters": {"type": "object", "properties": {}},
    }
    assert schemas[1]["strict"] is True
    assert schemas[2]["strict"] is False
    assert all(set(schema) <= {"name", "description", "parameters", "strict"} for schema in schemas)


async def test_schemas_parameters_are_deep_copied(tools: ToolRegistry) -> None:
    tool = _tool("read")
    tools.register(tool)
    tools.schemas()[0]["parameters"]["properties"]["injected"] = {"type": "string"}
    assert tool.parameters == {"type": "object", "properties": {}}
    assert tools.schemas()[0]["parameters"] == {"type": "object", "properties": {}}


async def test_tool_registered_by_a_plugin_is_removed_with_it(tools: ToolRegistry, ctx: Context) -> None:
    @plugin("tool-owner", inject=("tools",))
    def owner(pctx: Context, config: object) -> None:
        pctx.tools.register(_tool("owned"))

    dispose = ctx.plugin(owner)
    assert tools.get("owned") is not None
    await dispose()
    assert tools.get("owned") is None


async def test_plugin_tools_appear_in_the_system_prompt_assembly(ctx: Context) -> None:
    @plugin("tool-owner", inject=("tools",))
    def owner(pctx: Context, config: object) -> None:
        pctx.tools.register(_tool("owned", strict=True))

    dispose = ctx.plugin(owner)
    assembly = await ctx.system_prompt.assemble()
    assert assembly.tools == [
        {
            "name": "owned",
            "description": "the owned tool",
            "parameters": {"type": "object", "properties": {}},
            "strict": True,
        }
    ]

    await dispose()
    assert (await ctx.system_prompt.assemble()).tools == []


async def test_tools_plugin_waits_for_system_prompt(app: App) -> None:
    app.ctx.plugin(tools_plugin)
    assert app.ctx.get("tools") is None
    app.ctx.plugin(system_prompt_plugin)
    assert isinstance(app.ctx.get("tools"), ToolRegistry)


# -- execute ------------------------------------------------------------------------------------------------


async def test_execute_runs_the_tool_and_wraps_string_output(tools: ToolRegistry) -> None:
    calls: list[Any] = []
    tools.register(_tool("read", output="file body", calls=calls))

    result = await tools.execute(_call("read", {"path": "a"}, call_id="c7"))

    assert result == ToolResult(call_id="c7", content=[{"type": "text", "text": "file body"}])
    assert calls == [{"path": "a"}]


async def test_execute_passes_list_output_through(tools: ToolRegistry) -> None:
    blocks: list[ContentBlock] = [{"type": "text", "text": "a"}, {"type": "image", "url": "data:x"}]
    tools.register(_tool("img", output=blocks))
    result = await tools.execute(_call("img"))
    assert result.content == blocks
    assert result.is_error is False
    assert result.error is None


async def test_tool_receives_the_execution(tools: ToolRegistry) -> None:
    seen: list[ToolExecution] = []

    async def execute(arguments: Any, execution: ToolExecution) -> str:
        seen.append(execution)
        return ""

    tools.register(ToolDefinition("probe", "", {}, execute))
    call = _call("probe", {"a": 1})
    await tools.execute(call)
    assert seen == [call]


async def test_unknown_tool_becomes_an_error_result(tools: ToolRegistry) -> None:
    result = await tools.execute(_call("missing", call_id="c3"))

    assert result.call_id == "c3"
    assert result.is_error is True
    assert _text(result) == "Error: unknown tool 'missing'"
    assert result.error == {"name": "ToolNotFoundError", "code": "UNKNOWN_TOOL"}


async def test_tool_exception_becomes_an_error_result(tools: ToolRegistry) -> None:
    async def fails(arguments: Any, execution: ToolExecution) -> str:
        raise RuntimeError("disk on fire")

    tools.register(ToolDefinition("fails", "", {}, fails))
    result = await tools.execute(_call("fails", call_id="c4"))

    assert result.call_id == "c4"
    assert result.is_error is True
    assert _text(result) == "Error: disk on fire"
    assert result.error is None  # RuntimeError carries no code


async def test_tool_exception_with_a_code_attribute_reports_it(tools: ToolRegistry) -> None:
    class CodedError(Exception):
        code = "EACCES"

    async def fails(arguments: Any, execution: ToolExecution) -> str:
        raise CodedError("denied")

    tools.register(ToolDefinition("fails", "", {}, fails))
    result = await tools.execute(_call("fails"))
    assert result.error == {"name": "CodedError", "code": "EACCES"}


async def test_exception_without_message_uses_its_type_name(tools: ToolRegistry) -> None:
    async def fails(arguments: Any, execution: ToolExecution) -> str:
        raise KeyError()

    tools.register(ToolDefinition("fails", "", {}, fails))
    assert _text(await tools.execute(_call("fails"))) == "Error: KeyError"


async def test_listener_exception_becomes_an_error_result(tools: ToolRegistry, ctx: Context) -> None:
    calls: list[Any] = []
    tools.register(_tool("read", calls=calls))

    async def broken(execution: ToolExecution, next_: NextFn) -> ToolResult:
        raise ValueError("gate crashed")

    ctx.on(ev.TOOLS_EXECUTE, broken)
    result = await tools.execute(_call("read", call_id="c5"))

    assert result.call_id == "c5"
    assert result.is_error is True
    assert _text(result) == "Error: gate crashed"
    assert calls == []


async def test_listener_returning_without_next_vetoes_the_call(tools: ToolRegistry, ctx: Context) -> None:
    calls: list[Any] = []
    tools.register(_tool("rm", calls=calls))
    seen: list[str] = []

    async def gate(execution: ToolExecution, next_: NextFn) -> ToolResult:
        seen.append(execution.name)
        return ToolResult(execution.call_id, [{"type": "text", "text": "denied by policy"}], is_error=True)

    ctx.on(ev.TOOLS_EXECUTE, gate)
    result = await tools.execute(_call("rm"))

    assert seen == ["rm"]
    assert calls == []
    assert _text(result) == "denied by policy"


async def test_listener_may_rewrite_the_execution_and_the_result(tools: ToolRegistry, ctx: Context) -> None:
    calls: list[Any] = []
    tools.register(_tool("read", output="raw", calls=calls))

    async def middleware(execution: ToolExecution, next_: NextFn) -> ToolResult:
        result = await next_(dataclasses.replace(execution, arguments={"rewritten": True}))
        return dataclasses.replace(result, content=[*result.content, {"type": "text", "text": "+post"}])

    ctx.on(ev.TOOLS_EXECUTE, middleware)
    result = await tools.execute(_call("read", {"original": True}))

    assert calls == [{"rewritten": True}]
    assert _text(result) == "raw+post"


# -- define_tool --------------------------------------------------------------------------------------------


class _ReadArgs(pydantic.BaseModel):
    path: str
    limit: int = 10


def _read_tool(seen: list[_ReadArgs]) -> ToolDefinition:
    async def read(args: _ReadArgs, execution: ToolExecution) -> str:
        seen.append(args)
        return f"{args.path}:{args.limit}"

    return define_tool("read", "Read a file", _ReadArgs, read, strict=True)


async def test_define_tool_schema_is_the_compacted_model_json_schema(tools: ToolRegistry) -> None:
    tool = _read_tool([])
    assert tool.parameters == {
        "properties": {"path": {"type": "string"}, "limit": {"default": 10, "type": "integer"}},
        "required": ["path"],
        "type": "object",
        "additionalProperties": False,
    }
    tools.register(tool)
    schema = tools.schemas()[0]
    assert schema["name"] == "read"
    assert schema["description"] == "Read a file"
    assert schema["strict"] is True
    assert schema["parameters"]["required"] == ["path"]


async def test_define_tool_validates_dict_arguments(tools: ToolRegistry) -> None:
    seen: list[_ReadArgs] = []
    tools.register(_read_tool(seen))
    result = await tools.execute(_call("read", {"path": "a.txt", "limit": "5"}))
    assert _text(result) == "a.txt:5"
    assert seen == [_ReadArgs(path="a.txt", limit=5)]


async def test_define_tool_accepts_json_string_arguments(tools: ToolRegistry) -> None:
    seen: list[_ReadArgs] = []
    tools.register(_read_tool(seen))
    result = await tools.execute(_call("read", '{"path": "b.txt"}'))
    assert result.is_error is False
    assert _text(result) == "b.txt:10"


@pytest.mark.parametrize(
    "arguments",
    [{"limit": 1}, {"path": "x", "limit": "many"}, '{"path": ', "[1, 2]", ""],
    ids=["missing-field", "wrong-type", "invalid-json", "json-array", "empty-string"],
)
async def test_define_tool_bad_arguments_become_invalid_arguments_error(tools: ToolRegistry, arguments: Any) -> None:
    seen: list[_ReadArgs] = []
    tools.register(_read_tool(seen))

    result = await tools.execute(_call("read", arguments, call_id="c9"))

    assert result.call_id == "c9"
    assert result.is_error is True
    assert result.error == {"name": "ToolArgsError", "code": "INVALID_ARGUMENTS"}
    assert _text(result).startswith("Error: invalid arguments for read: ")
    assert seen == []


async def test_define_tool_error_message_names_the_bad_field(tools: ToolRegistry) -> None:
    tools.register(_read_tool([]))
    result = await tools.execute(_call("read", {"limit": 1}))
    assert "path" in _text(result)
