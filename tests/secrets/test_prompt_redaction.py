"""A secret typed into a prompt is redacted in the session file as the recording redacts it, while the model
gets the prompt as typed for that turn (issue 34 item 7); ``secrets.redact_prompts: false`` keeps it."""

from __future__ import annotations

import secrets
from pathlib import Path

import anyio
import pytest

from tests.context.test_sections import write_config
from tests.support.provider_server import Reply, serve
from tests.support.provider_wire import oa_text_reply
from tests.support.sdk import run_dsh


def stored(tmp_path: Path) -> str:
    return "".join(p.read_text() for p in (tmp_path / "dsh-data").rglob("*.jsonl"))


@pytest.mark.parametrize("redact", [True, False])
async def test_a_pasted_key_is_redacted_in_the_session_file_and_sent_to_the_model_as_typed(
    tmp_path: Path, redact: bool
) -> None:
    key = "sk-test-" + secrets.token_hex(20)
    if not redact:
        write_config(tmp_path, "secrets: {redact_prompts: false}\n")
    with serve() as server:
        server.script(Reply(events=oa_text_reply("noted")))
        env = {"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": key}
        async with run_dsh(tmp_path, "openai:gpt-4.1", env=env) as daemon:
            session = await daemon.start()
            with anyio.fail_after(60):
                response = await daemon.prompt(session, f"my key is {key}, use it")
            assert response.stop_reason == "end_turn"
        (request,) = server.requests
    assert f"my key is {key}, use it" in str(request.body)  # the model got the prompt as typed
    text = stored(tmp_path)
    assert "noted" in text  # the session was stored
    if redact:
        assert key not in text and key[: len(key) // 2] not in text
        assert "my key is [redacted OPENAI_API_KEY], use it" in text
    else:
        assert f"my key is {key}, use it" in text
