"""The llm service: adapter registry, model resolution and the ``llm/stream`` seam (``dsh.services.llm``)."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable

import pytest

from dsh import events as ev
from dsh.errors import DshError, LlmError
from dsh.kernel import Context, Next, plugin
from dsh.services.llm import GenerateRequest, LlmService, StreamChunk, llm_plugin
from tests.conftest import Recorder

NextFn = Next[GenerateRequest, AsyncIterator[StreamChunk]]


PLUGINS = (llm_plugin,)
"""What the shared ``ctx`` fixture (``tests/conftest.py``) loads, in order."""


@pytest.fixture
def llm(ctx: Context) -> LlmService:
    return ctx.llm


def _adapter(
    label: str, seen: list[GenerateRequest] | None = None
) -> Callable[[GenerateRequest], AsyncIterator[StreamChunk]]:
    async def adapter(request: GenerateRequest) -> AsyncIterator[StreamChunk]:
        if seen is not None:
            seen.append(request)
        yield {"type": "text-delta", "text": f"{label}:"}
        yield {"type": "text-delta", "text": request.model}
        yield {"type": "usage", "usage": {"input_tokens": 1, "output_tokens": 2}}
        yield {"type": "finish", "reason": {"kind": "stop"}}

    return adapter


def _request(model: str) -> GenerateRequest:
    return GenerateRequest(model=model, messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}])


async def _collect(stream: AsyncIterator[StreamChunk]) -> list[StreamChunk]:
    return [chunk async for chunk in stream]


async def _text_of(llm: LlmService, model: str) -> str:
    return "".join(
        chunk["text"] for chunk in await _collect(await llm.stream(_request(model))) if chunk["type"] == "text-delta"
    )


# -- registry -----------------------------------------------------------------------------------------------


async def test_register_adapter_lists_models_and_emits_change(
    llm: LlmService, ctx: Context, recorder: Recorder
) -> None:
    ctx.on(ev.LLM_ADAPTER_CHANGE, recorder.listener("change"))

    remove = llm.register_adapter(["a", "b"], _adapter("x"))
    assert llm.models() == ["a", "b"]
    assert recorder.names() == ["change"]

    await remove()
    assert llm.models() == []
    assert recorder.names() == ["change", "change"]


async def test_duplicate_model_is_rejected_with_duplicate_adapter_and_nothing_registered(
    llm: LlmService, ctx: Context, recorder: Recorder
) -> None:
    first = _adapter("first")
    llm.register_adapter(["a"], first)
    ctx.on(ev.LLM_ADAPTER_CHANGE, recorder.listener("change"))

    with pytest.raises(LlmError) as caught:
        llm.register_adapter(["new", "a"], _adapter("second"))

    assert caught.value.code == "DUPLICATE_ADAPTER"
    assert "a" in caught.value.message
    assert isinstance(caught.value, DshError)
    assert llm.models() == ["a"]  # "new" was not half-registered
    assert llm.resolve("a") is first
    assert recorder.calls == []


async def test_unknown_model_raises_no_adapter_naming_the_model(llm: LlmService) -> None:
    llm.register_adapter(["known"], _adapter("k"))
    with pytest.raises(LlmError) as caught:
        llm.resolve("mystery:model")
    assert caught.value.code == "NO_ADAPTER"
    assert "'mystery:model'" in caught.value.message
    assert "known" in caught.value.message  # and the models that are available


async def test_stream_for_unknown_model_raises_no_adapter(llm: LlmService) -> None:
    with pytest.raises(LlmError) as caught:
        await llm.stream(_request("nobody"))
    assert caught.value.code == "NO_ADAPTER"
    assert "'nobody'" in str(caught.value)


async def test_provider_prefix_serves_any_model_of_that_provider(llm: LlmService) -> None:
    adapter = _adapter("scripted")
    llm.register_adapter(["scripted:*"], adapter)

    assert llm.resolve("scripted:anything") is adapter
    assert llm.resolve("scripted:/path/to:file.yaml") is adapter
    assert await _text_of(llm, "scripted:x") == "scripted:scripted:x"
    with pytest.raises(LlmError):
        llm.resolve("scripted")  # a bare name is not a provider model
    with pytest.raises(LlmError):
        llm.resolve("other:anything")


async def test_exact_name_beats_provider_prefix(llm: LlmService) -> None:
    prefix, exact = _adapter("prefix"), _adapter("exact")
    llm.register_adapter(["openai:*"], prefix)
    llm.register_adapter(["openai:gpt-special"], exact)

    assert llm.resolve("openai:gpt-special") is exact
    assert llm.resolve("openai:gpt-other") is prefix


async def test_adapter_is_removed_when_its_plugin_is_disposed(llm: LlmService, ctx: Context) -> None:
    @plugin("provider", inject=("llm",))
    def provider(pctx: Context, config: object) -> None:
        pctx.llm.register_adapter(["echo"], _adapter("echo"))

    dispose = ctx.plugin(provider)
    assert llm.models() == ["echo"]
    await dispose()
    assert llm.models() == []
    with pytest.raises(LlmError):
        llm.resolve("echo")


async def test_removing_an_adapter_leaves_a_later_registration_of_the_same_name(llm: LlmService) -> None:
    remove = llm.register_adapter(["a"], _adapter("first"))
    await remove()
    second = _adapter("second")
    llm.register_adapter(["a"], second)
    await remove()  # idempotent: the second registration survives
    assert llm.resolve("a") is second


# -- stream and generate ------------------------------------------------------------------------------------


async def test_stream_opens_the_resolved_adapter_with_the_request(llm: LlmService) -> None:
    seen: list[GenerateRequest] = []
    llm.register_adapter(["m"], _adapter("m", seen))
    request = _request("m")

    chunks = await _collect(await llm.stream(request))

    assert seen == [request]
    assert chunks[-1] == {"type": "finish", "reason": {"kind": "stop"}}


async def test_llm_stream_waterfall_can_reroute_the_request(llm: LlmService, ctx: Context) -> None:
    llm.register_adapter(["real"], _adapter("real"))

    async def reroute(request: GenerateRequest, next_: NextFn) -> AsyncIterator[StreamChunk]:
        if request.model == "alias":
            return await next_(dataclasses.replace(request, model="real"))
        return await next_()

    ctx.on(ev.LLM_STREAM, reroute)

    assert await _text_of(llm, "alias") == "real:real"


async def test_llm_stream_waterfall_can_replace_the_stream(llm: LlmService, ctx: Context) -> None:
    seen: list[GenerateRequest] = []
    llm.register_adapter(["m"], _adapter("m", seen))

    async def replay() -> AsyncIterator[StreamChunk]:
        yield {"type": "text-delta", "text": "replayed"}
        yield {"type": "finish", "reason": {"kind": "stop"}}

    async def replace(request: GenerateRequest, next_: NextFn) -> AsyncIterator[StreamChunk]:
        return replay()

    ctx.on(ev.LLM_STREAM, replace)

    assert await _text_of(llm, "m") == "replayed"
    assert await _text_of(llm, "no-adapter-needed") == "replayed"
    assert seen == []


async def test_llm_stream_waterfall_can_wrap_the_stream(llm: LlmService, ctx: Context) -> None:
    llm.register_adapter(["m"], _adapter("m"))
    recorded: list[StreamChunk] = []

    async def record(request: GenerateRequest, next_: NextFn) -> AsyncIterator[StreamChunk]:
        inner = await next_()

        async def tee() -> AsyncIterator[StreamChunk]:
            async for chunk in inner:
                recorded.append(chunk)
                yield chunk

        return tee()

    ctx.on(ev.LLM_STREAM, record)
    chunks = await _collect(await llm.stream(_request("m")))
    assert recorded == chunks
    assert len(chunks) == 4


async def test_generate_assembles_the_stream(llm: LlmService) -> None:
    llm.register_adapter(["m"], _adapter("gen"))

    result = await llm.generate(_request("m"))

    assert result.message == {"role": "assistant", "content": [{"type": "text", "text": "gen:m"}]}
    assert result.usage == {"input_tokens": 1, "output_tokens": 2}
    assert result.finish == {"kind": "stop"}


async def test_generate_goes_through_the_stream_waterfall(llm: LlmService, ctx: Context) -> None:
    llm.register_adapter(["real"], _adapter("real"))

    async def reroute(request: GenerateRequest, next_: NextFn) -> AsyncIterator[StreamChunk]:
        return await next_(dataclasses.replace(request, model="real"))

    ctx.on(ev.LLM_STREAM, reroute)
    result = await llm.generate(_request("alias"))
    assert result.message["content"] == [{"type": "text", "text": "real:real"}]


async def test_adapter_stream_failure_propagates_from_generate(llm: LlmService) -> None:
    async def broken(request: GenerateRequest) -> AsyncIterator[StreamChunk]:
        yield {"type": "text-delta", "text": "partial"}
        raise LlmError("connection reset", "STREAM_FAILED")

    llm.register_adapter(["broken"], broken)
    with pytest.raises(LlmError) as caught:
        await llm.generate(_request("broken"))
    assert caught.value.code == "STREAM_FAILED"
