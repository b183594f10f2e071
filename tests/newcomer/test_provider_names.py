"""Issue #29 item 1: a key never goes to a provider the user did not name.

An unknown provider name without a ``base_url`` is an error with a suggestion (``dsh setup``, ``dsh config
check``, ``--model`` at start-up), and no request leaves for any address: a loopback server stands in for the
OpenAI default address (``OPENAI_BASE_URL``, the address an unknown name used to fall back to) and must receive
nothing.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from pydantic import SecretStr

from dsh.errors import LlmError
from dsh.providers._settings import ProviderSettings
from dsh.services.llm import GenerateRequest
from tests.support.env import sandbox_env
from tests.support.provider_server import FakeProvider, Reply, serve
from tests.support.provider_wire import oa_text_reply

WAIT = 30
ANTHROPIC_KEY = "sk-ant-api03-newcomer-0123456789"


@pytest.fixture
def decoy() -> Iterator[FakeProvider]:
    """Stands in for OpenAI's address: every test asserts it received nothing."""
    with serve() as fake:
        yield fake


async def dsh(tmp_path: Path, *args: str, decoy: FakeProvider, **extra: str) -> subprocess.CompletedProcess[bytes]:
    env = sandbox_env(tmp_path, "echo", extra={"OPENAI_BASE_URL": f"{decoy.url}/v1", **extra})
    with anyio.fail_after(WAIT):
        return await anyio.run_process(
            [sys.executable, "-m", "dsh", *args], env=env, stdin=subprocess.DEVNULL, check=False
        )


def one_line(err: bytes) -> str:
    text = err.decode()
    assert text.count("\n") == 1 and "Traceback" not in text, text
    return text


async def test_setup_with_a_misspelt_provider_fails_with_a_suggestion_and_sends_nothing(
    tmp_path: Path, decoy: FakeProvider
) -> None:
    config = tmp_path / "config.yaml"
    done = await dsh(
        tmp_path, "setup", "--provider", "antropic", "--api-key", ANTHROPIC_KEY, "--config", str(config), decoy=decoy
    )
    err = one_line(done.stderr)
    assert done.returncode == 2
    assert "provider 'antropic' is not a built-in provider (did you mean 'anthropic'?)" in err
    assert "--base-url" in err and ANTHROPIC_KEY not in err
    assert decoy.requests == [] and not config.exists()


async def test_setup_with_an_unknown_provider_and_no_check_writes_nothing(tmp_path: Path, decoy: FakeProvider) -> None:
    config = tmp_path / "config.yaml"
    args = ("setup", "--provider", "foo", "--api-key", ANTHROPIC_KEY, "--model", "m", "--no-check", "--config")
    done = await dsh(tmp_path, *args, str(config), decoy=decoy)
    err = one_line(done.stderr)
    assert done.returncode == 2 and "provider 'foo' is not a built-in provider and has no base_url" in err
    assert decoy.requests == [] and not config.exists()


async def test_setup_of_a_named_address_checks_the_key_there_only(tmp_path: Path, decoy: FakeProvider) -> None:
    """An unknown name with ``--base-url`` is a provider of the user's: the check goes to that address, never
    to the one ``OPENAI_BASE_URL`` names (not even for ``--provider openai --base-url``)."""
    with serve() as own:
        for provider in ("mine", "openai"):
            own.script(Reply(events=oa_text_reply("OK")))
            config = tmp_path / f"{provider}.yaml"
            args = ("setup", "--provider", provider, "--api-key", ANTHROPIC_KEY, "--model", "m")
            done = await dsh(tmp_path, *args, "--base-url", f"{own.url}/v1", "--config", str(config), decoy=decoy)
            assert done.returncode == 0, done.stderr
        assert len(own.requests) == 2
    assert decoy.requests == []


@pytest.mark.parametrize(
    ("name", "says"),
    [("antropic", "(did you mean 'anthropic'?)"), ("foo", "provider 'foo' is not a built-in provider and has")],
)
async def test_config_check_refuses_an_unknown_provider_without_base_url(
    tmp_path: Path, decoy: FakeProvider, name: str, says: str
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(f"providers:\n  {name}: {{api_key: {ANTHROPIC_KEY}}}\nmodel: {name}:x\n", encoding="utf-8")
    done = await dsh(tmp_path, "config", "check", "--config", str(config), decoy=decoy)
    err = one_line(done.stderr)
    assert done.returncode == 1 and says in err and ANTHROPIC_KEY not in err, err
    assert done.stdout == b""  # not "ok"
    with_address = f"providers:\n  {name}: {{api_key: k, base_url: 'http://127.0.0.1:9/v1'}}\n"
    config.write_text(with_address, encoding="utf-8")
    done = await dsh(tmp_path, "config", "check", "--config", str(config), decoy=decoy)
    assert done.returncode == 0 and done.stdout.startswith(b"ok: "), done.stderr
    assert decoy.requests == []


async def test_a_misspelt_model_provider_is_refused_with_a_suggestion(tmp_path: Path, decoy: FakeProvider) -> None:
    done = await dsh(tmp_path, "prompt", "hi", "--model", "antropic:claude-sonnet-4-5", decoy=decoy)
    err = one_line(done.stderr)
    assert done.returncode == 2 and "no provider 'antropic' (did you mean 'anthropic'?)" in err, err
    assert decoy.requests == []


async def test_the_transport_never_falls_back_to_another_providers_address(
    decoy: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Settings that bypass the configuration file's check (a plugin's, a test's) still send nothing: the
    transport refuses an unknown name without ``base_url`` instead of using ``OPENAI_BASE_URL`` or OpenAI's."""
    from dsh.app import load_core
    from dsh.kernel import App

    monkeypatch.setenv("OPENAI_BASE_URL", f"{decoy.url}/v1")
    settings = ProviderSettings(api_key=SecretStr(ANTHROPIC_KEY), retries=0)
    request = GenerateRequest(
        model="antropic:x", messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    )
    async with App() as app:
        load_core(app.ctx, providers={"antropic": settings}, builtin_tools=False)
        with anyio.fail_after(WAIT), pytest.raises(LlmError) as caught:
            await app.ctx.llm.generate(request)
    assert caught.value.code == "BAD_BASE_URL" and "did you mean 'anthropic'?" in caught.value.message
    assert ANTHROPIC_KEY not in caught.value.message
    assert decoy.requests == []


async def test_the_daemon_names_a_misspelt_model_provider_at_start_up(tmp_path: Path, decoy: FakeProvider) -> None:
    """``dsh acp`` keeps serving (RFC 0011) but says at start-up, on stderr, what was probably meant."""
    done = await dsh(tmp_path, "acp", "--model", "antropic:claude-sonnet-4-5", decoy=decoy)
    err = one_line(done.stderr)
    assert done.returncode == 0 and done.stdout == b""  # stdin EOF: a clean exit, nothing but frames on stdout
    assert err.startswith("dsh: --model: no provider serves model 'antropic:claude-sonnet-4-5'"), err
    assert "(did you mean 'anthropic'?)" in err and "session/new will answer this error" in err
    assert decoy.requests == []
