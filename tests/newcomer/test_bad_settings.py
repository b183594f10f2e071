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


PLUGINS = "tests.newcomer._plugins"


@pytest.mark.parametrize("command", [["acp"], ["prompt", "hi"], ["config", "check"]])
@pytest.mark.parametrize(
    ("entry", "says"),
    [
        (
            "os:path",
            "dsh: DSH_PLUGINS: 'os:path': os.path is a module, not a plugin (a function plugin(ctx, config))\n",
        ),
        ("no_such_module_29:plugin", "there is no module 'no_such_module_29' (is it installed, or on PYTHONPATH?)"),
        ("os:no_such_attribute", "module 'os' has no attribute 'no_such_attribute'"),
    ],
)
async def test_a_bad_plugin_entry_is_one_line_and_status_2(
    tmp_path: Path, command: list[str], entry: str, says: str
) -> None:
    done = await run(tmp_path, *command, DSH_PLUGINS=f"{PLUGINS}:plugin_model,{entry}")
    err = one_line(done)
    assert done.returncode == 2 and err.startswith(f"dsh: DSH_PLUGINS: {entry!r}: ") and says in err, err


@pytest.mark.parametrize("command", [["acp"], ["prompt", "hi"]])
async def test_a_plugin_whose_set_up_fails_is_one_line_and_status_2(tmp_path: Path, command: list[str]) -> None:
    done = await run(tmp_path, *command, DSH_PLUGINS=f"{PLUGINS}:failing")
    err = one_line(done)
    assert done.returncode == 2
    assert (
        err == f"dsh: DSH_PLUGINS: '{PLUGINS}:failing': its set-up failed: RuntimeError: the plugin could not start\n"
    )


async def test_dsh_prompt_loads_dsh_plugins_like_the_daemon(tmp_path: Path) -> None:
    from tests.newcomer._plugins import ANSWER

    done = await run(tmp_path, "prompt", "hi", "--model", "plugin-model", DSH_PLUGINS=f"{PLUGINS}:plugin_model")
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode() == ANSWER + "\n"
