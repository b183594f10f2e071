"""Issue #11: a model no adapter serves is reported at start-up on stderr (one line), ``session/new`` answers a
clear error naming the available providers, and the daemon keeps serving."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from acp import RequestError

from tests.support.sdk import run_dsh

WAIT = 20


async def test_an_unknown_model_is_reported_and_session_new_names_the_providers(tmp_path: Path) -> None:
    async with run_dsh(tmp_path, "nope:some-model") as dsh:
        with anyio.fail_after(WAIT):
            assert (await dsh.initialize()).protocol_version == 1
            for _ in range(2):  # still serving after the first refusal
                with pytest.raises(RequestError) as caught:
                    await dsh.new_session()
                message = str(caught.value)
                assert "no provider serves model 'nope:some-model'" in message
                assert "available providers:" in message and "echo" in message and "openai" in message
    lines = dsh.stderr().splitlines()
    warnings = [line for line in lines if "nope:some-model" in line]
    assert warnings == [
        line for line in lines if line.startswith("dsh: DSH_MODEL: no provider serves model 'nope:some-model'")
    ]
    assert len(warnings) == 1
    assert "Traceback" not in dsh.stderr()
