"""The model picker (config option of category ``model``, legacy ``models`` and ``session/set_model``) and
``usage_update``, driven in process through the ACP front end's handlers; every frame is checked against the
official SDK's models."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from acp.schema import NewSessionResponse, SessionNotification, SetSessionConfigOptionResponse

from dsh.app import load_core
from dsh.frontends.acp._frontend import AcpFrontend, AcpOptions, acp_plugin
from dsh.frontends.acp._rpc import INVALID_PARAMS, RpcError
from dsh.frontends.acp._wire import NewSessionParams, PromptParams, SetConfigOptionParams, SetModelParams
from dsh.kernel import App
from dsh.services.llm import ModelInfo


class Frames(list[bytes]):
    def updates(self) -> list[dict[str, Any]]:
        messages = [json.loads(frame) for frame in self]
        return [m["params"]["update"] for m in messages if m.get("method") == "session/update"]


@pytest.fixture
async def frontend() -> AsyncIterator[tuple[AcpFrontend, Frames, App]]:
    frames = Frames()
    async with App() as app:
        ctx = app.ctx
        load_core(ctx)
        ctx.scripted_models.add("a", [{"text": "from a"}] * 5)
        ctx.scripted_models.add("b", [{"text": "from b"}] * 5)
        ctx.plugin(acp_plugin, AcpOptions(frames.append, model="scripted:a", models=("scripted:b", "scripted:a")))
        yield ctx.acp, frames, app


async def new_session(fe: AcpFrontend) -> dict[str, Any]:
    return await fe.new_session(NewSessionParams.model_validate({"cwd": "/tmp", "mcpServers": []}))


async def prompt(fe: AcpFrontend, session_id: str, text: str) -> dict[str, Any]:
    with anyio.fail_after(5):
        return await fe.prompt(
            PromptParams.model_validate({"sessionId": session_id, "prompt": [{"type": "text", "text": text}]})
        )


def said(frames: Frames) -> str:
    return "".join(u["content"]["text"] for u in frames.updates() if u["sessionUpdate"] == "agent_message_chunk")


async def test_new_session_offers_the_models_with_the_default_selected(frontend: Any) -> None:
    fe, _, _ = frontend
    result = await new_session(fe)
    legacy = result.pop("models")
    NewSessionResponse.model_validate(result)
    (option,) = [o for o in result["configOptions"] if o["id"] == "model"]
    assert option["id"] == "model" and option["category"] == "model" and option["type"] == "select"
    assert option["currentValue"] == "scripted:a"
    assert [o["value"] for o in option["options"]] == ["scripted:a", "scripted:b"]  # default first, no duplicate
    assert legacy == {
        "currentModelId": "scripted:a",
        "availableModels": [
            {"modelId": "scripted:a", "name": "scripted:a"},
            {"modelId": "scripted:b", "name": "scripted:b"},
        ],
    }


async def test_set_config_option_switches_the_model_from_the_next_step_and_answers_the_full_list(frontend: Any) -> None:
    fe, frames, _ = frontend
    session_id = (await new_session(fe))["sessionId"]
    await prompt(fe, session_id, "one")
    assert said(frames) == "from a"
    frames.clear()
    answer = await fe.set_config_option(
        SetConfigOptionParams.model_validate({"sessionId": session_id, "configId": "model", "value": "scripted:b"})
    )
    SetSessionConfigOptionResponse.model_validate(answer)
    assert [o["currentValue"] for o in answer["configOptions"] if o["id"] == "model"] == ["scripted:b"]
    await prompt(fe, session_id, "two")
    assert said(frames) == "from b"


async def test_the_legacy_set_model_switches_too(frontend: Any) -> None:
    fe, frames, _ = frontend
    session_id = (await new_session(fe))["sessionId"]
    assert await fe.set_model(SetModelParams.model_validate({"sessionId": session_id, "modelId": "scripted:b"})) == {}
    await prompt(fe, session_id, "x")
    assert said(frames) == "from b"


@pytest.mark.parametrize(
    ("config_id", "value"),
    [("model", "scripted:nope"), ("model", True), ("color", "red")],
    ids=["unoffered", "bool", "unknown-id"],
)
async def test_a_bad_choice_is_invalid_params_and_changes_nothing(frontend: Any, config_id: str, value: Any) -> None:
    fe, frames, _ = frontend
    session_id = (await new_session(fe))["sessionId"]
    with pytest.raises(RpcError) as caught:
        await fe.set_config_option(
            SetConfigOptionParams.model_validate({"sessionId": session_id, "configId": config_id, "value": value})
        )
    assert caught.value.code == INVALID_PARAMS
    await prompt(fe, session_id, "x")
    assert said(frames) == "from a"


async def test_usage_update_after_each_step_when_the_context_window_is_known(frontend: Any) -> None:
    fe, frames, app = frontend
    app.ctx.llm.set_model_info("scripted:a", ModelInfo(name="Model A", context_window=1000))
    result = await new_session(fe)
    (model_option,) = [o for o in result["configOptions"] if o["id"] == "model"]
    assert model_option["options"][0] == {"value": "scripted:a", "name": "Model A"}
    await prompt(fe, result["sessionId"], "count these words please")
    usage = [u for u in frames.updates() if u["sessionUpdate"] == "usage_update"]
    assert len(usage) == 1
    (update,) = usage
    assert update["size"] == 1000
    assert update["used"] > 0
    SessionNotification.model_validate({"sessionId": result["sessionId"], "update": update})


async def test_no_usage_update_without_a_known_context_window(frontend: Any) -> None:
    fe, frames, _ = frontend
    session_id = (await new_session(fe))["sessionId"]
    await prompt(fe, session_id, "x")
    assert not [u for u in frames.updates() if u["sessionUpdate"] == "usage_update"]
