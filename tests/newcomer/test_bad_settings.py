"""Issue #29 item 3: bad plugin and model settings are one line and status 2, for every command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from tests.support.env import sandbox_env

WAIT = 30


async def run(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[bytes]:
    env = sandbox_env(tmp_path, "echo", extra=extra)
    with anyio.fail_after(WAIT):
        return await anyio.run_process(
            [sys.executable, "-m", "dsh", *args], env=env, stdin=subprocess.DEVNULL, check=False
        )


def one_line(done: subprocess.CompletedProcess[bytes]) -> str:
    err = done.stderr.decode()
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert done.stdout == b""  # nothing on the protocol's stream
    return err


@pytest.mark.parametrize("command", [["acp"], ["prompt", "hi"]])
@pytest.mark.parametrize(
    ("flags", "extra", "origin", "value"),
    [
        (["--model", "openai:"], {}, "--model", "openai:"),
        ([], {"DSH_MODEL": "openai:"}, "DSH_MODEL", "openai:"),
        (["--model", ":gpt-4.1"], {}, "--model", ":gpt-4.1"),
    ],
)
async def test_a_model_name_with_an_empty_part_is_refused_at_start_up(
    tmp_path: Path, command: list[str], flags: list[str], extra: dict[str, str], origin: str, value: str
) -> None:
    done = await run(tmp_path, *command, *flags, **extra)
    err = one_line(done)
    assert done.returncode == 2
    assert err == f"dsh: {origin}: {value!r} is not a model name; use provider:model, e.g. openai:gpt-4.1\n"
