"""Images end to end: the real daemon, the official SDK client, loopback OpenAI and Anthropic servers.

A prompt's PNG reaches each provider in its own format with the exact bytes; ``initialize`` advertises images
per the default model; a model configured without vision answers -32602 naming it; what is no acceptable image
is refused and the session file is left as it was.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError, image_block, text_block

from tests.support.images import b64, jpeg, png
from tests.support.provider_server import FakeProvider, Reply
from tests.support.provider_wire import an_text_reply, oa_text_reply
from tests.support.sdk import run_dsh

WAIT = 20


def config(tmp_path: Path, server: FakeProvider, model: str) -> dict[str, str]:
    """A config file with three providers at the loopback server: ``oai`` (Chat Completions), ``ant`` (Messages)
    and ``blind`` (Chat Completions, every model configured without vision)."""
    path = tmp_path / "config.yaml"
    path.write_text(
        f"""
model: {model}
models: [oai:gpt-4o, ant:claude-sonnet-4-5, blind:gpt-4o]
providers:
  oai: {{type: openai, base_url: "{server.url}/v1", key_required: false}}
  ant: {{type: anthropic, base_url: "{server.url}", api_key: test-key}}
  blind: {{type: openai, base_url: "{server.url}/v1", key_required: false, vision: {{"*": false}}}}
""",
        encoding="utf-8",
    )
    return {"DSH_CONFIG": str(path), "DSH_MODEL": model}


def _data_url_bytes(url: str, mime: str) -> bytes:
    head, _, data = url.partition(",")
    assert head == f"data:{mime};base64"
    return base64.b64decode(data, validate=True)


async def test_a_png_reaches_openai_and_anthropic_with_its_exact_bytes(tmp_path: Path, server: FakeProvider) -> None:
    picture = png(64, 48, seed=7)
    server.script(
        Reply(events=oa_text_reply("A chart.")),
        Reply(events=an_text_reply("Still a chart.")),
        Reply(events=oa_text_reply("I read its description.")),
    )
    async with run_dsh(tmp_path, env=config(tmp_path, server, "oai:gpt-4o")) as dsh:
        with anyio.fail_after(WAIT):
            init = await dsh.initialize()
            assert init.agent_capabilities.prompt_capabilities.image is True
            session = await dsh.conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            (picker,) = [o for o in session.config_options or [] if o.id == "model"]
            seeing = {c.value: c.description for c in picker.options}  # type: ignore[union-attr]
            assert seeing == {"oai:gpt-4o": "sees images", "ant:claude-sonnet-4-5": "sees images", "blind:gpt-4o": None}
            answer = await dsh.conn.prompt(
                session_id=session.session_id,
                prompt=[text_block("what is this?"), image_block(b64(picture), "image/png")],
            )
            assert answer.stop_reason == "end_turn"
            await dsh.conn.set_config_option(
                config_id="model", session_id=session.session_id, value="ant:claude-sonnet-4-5"
            )
            answer = await dsh.conn.prompt(session_id=session.session_id, prompt=[text_block("and now?")])
            assert answer.stop_reason == "end_turn"
            # a model without vision later in the same session: the image in the history becomes a note
            await dsh.conn.set_config_option(config_id="model", session_id=session.session_id, value="blind:gpt-4o")
            answer = await dsh.conn.prompt(session_id=session.session_id, prompt=[text_block("and blind?")])
            assert answer.stop_reason == "end_turn"
    openai, anthropic, blind = server.requests
    assert "image_url" not in json.dumps(blind.body) and b64(picture)[:40] not in json.dumps(blind.body)
    first = blind.body["messages"][1]
    assert first["role"] == "user" and first["content"] == (
        f"what is this?[image: PNG image, 64x48, {len(picture)} bytes; not shown: blind:gpt-4o does not take images]"
    )
    assert openai.path == "/v1/chat/completions"
    user = openai.body["messages"][1]  # (the session note, date and mode, follows it)
    assert user["role"] == "user"
    text, image = user["content"]
    assert text == {"type": "text", "text": "what is this?"}
    assert image["type"] == "image_url" and set(image["image_url"]) == {"url"}
    assert _data_url_bytes(image["image_url"]["url"], "image/png") == picture
    assert anthropic.path == "/v1/messages"
    first_user = anthropic.body["messages"][0]
    assert first_user["role"] == "user"
    sent = [b for b in first_user["content"] if b["type"] == "image"]
    assert len(sent) == 1 and sent[0]["source"]["type"] == "base64" and sent[0]["source"]["media_type"] == "image/png"
    assert base64.b64decode(sent[0]["source"]["data"], validate=True) == picture


async def test_a_model_configured_without_vision_refuses_an_image_naming_the_model(
    tmp_path: Path, server: FakeProvider
) -> None:
    async with run_dsh(tmp_path, env=config(tmp_path, server, "blind:gpt-4o")) as dsh:
        with anyio.fail_after(WAIT):
            init = await dsh.initialize()
            assert init.agent_capabilities.prompt_capabilities.image is False
            session_id = await dsh.new_session()
            with pytest.raises(RequestError) as caught:
                await dsh.conn.prompt(
                    session_id=session_id, prompt=[text_block("look"), image_block(b64(jpeg()), "image/jpeg")]
                )
            assert caught.value.code == -32602
            assert "'blind:gpt-4o' does not take images" in str(caught.value)
            assert caught.value.data == {"field": "prompt[1]", "model": "blind:gpt-4o"}
            server.script(Reply(events=oa_text_reply("fine")))
            assert (await dsh.conn.prompt(session_id=session_id, prompt=[text_block("text then")])).stop_reason == (
                "end_turn"
            )
        assert "differs" not in dsh.stderr()  # the boot answer (no application yet) and the front end's agree
    assert len(server.requests) == 1  # the refused prompt never reached the model


async def test_what_is_no_acceptable_image_is_refused_and_the_session_file_is_unchanged(tmp_path: Path) -> None:
    data_dir = tmp_path / "dsh-data"
    refused: list[Any] = [
        image_block(b64(png(pad=25 * 1024 * 1024)), "image/png"),  # 25 MB: over the limit
        image_block(b64(b"a text file, labelled as a PNG\n"), "image/png"),
        image_block(b64(b'<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"/>'), "image/svg+xml"),
    ]
    async with run_dsh(tmp_path) as dsh:  # echo: the offline default takes images
        with anyio.fail_after(WAIT):
            session_id = await dsh.start()
            assert (
                await dsh.conn.prompt(session_id=session_id, prompt=[text_block("hello")])
            ).stop_reason == "end_turn"
            stored = (data_dir / f"{session_id}.jsonl").read_bytes()
            messages = []
            for block in refused:
                with pytest.raises(RequestError) as caught:
                    await dsh.conn.prompt(session_id=session_id, prompt=[text_block("look"), block])
                assert caught.value.code == -32602
                messages.append(str(caught.value))
            assert (data_dir / f"{session_id}.jsonl").read_bytes() == stored  # unchanged, byte for byte
            assert not (data_dir / "blobs").exists()  # and nothing stored apart either
            answer = await dsh.conn.prompt(session_id=session_id, prompt=[text_block("still here")])
            assert answer.stop_reason == "end_turn"
    assert "over the 20.0 MB limit" in messages[0]
    assert "(declared image/png) is not a PNG, JPEG, GIF or WebP image" in messages[1]
    assert "(declared image/svg+xml) is not a PNG, JPEG, GIF or WebP image" in messages[2]
    lines = (data_dir / f"{session_id}.jsonl").read_bytes()[len(stored) :].splitlines()
    assert any(b"still here" in line for line in lines) and not any(b"look" in line for line in lines)  # none stored
