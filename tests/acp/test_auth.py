"""Issue #11: authentication per the current ACP spec, with the official SDK client.

``authMethods`` holds the agent method always and the terminal method (``dsh setup``) only when the client
advertises ``auth.terminal``; ``logout`` is advertised and answered; a prompt whose model needs a missing key
answers the auth-required error (-32000) saying how to set it up, and the daemon keeps serving.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError
from acp.schema import AuthCapabilities, AuthMethodAgent, ClientCapabilities, Implementation, TerminalAuthMethod

from tests.support.sdk import DshProcess, run_dsh

WAIT = 20
AUTH_REQUIRED = -32000


async def initialize(dsh: DshProcess, *, terminal: bool) -> Any:
    caps = ClientCapabilities(auth=AuthCapabilities(terminal=True)) if terminal else ClientCapabilities()
    return await dsh.conn.initialize(
        protocol_version=1, client_capabilities=caps, client_info=Implementation(name="auth-test", version="0")
    )


async def test_without_terminal_auth_only_the_agent_method_is_offered(tmp_path: Path) -> None:
    async with run_dsh(tmp_path) as dsh:
        with anyio.fail_after(WAIT):
            init = await initialize(dsh, terminal=False)
    methods = init.auth_methods or []
    assert [type(m) for m in methods] == [AuthMethodAgent]
    assert methods[0].id == "dsh-local"
    assert init.agent_capabilities is not None and init.agent_capabilities.auth is not None
    assert init.agent_capabilities.auth.logout is not None


async def test_with_terminal_auth_the_setup_command_is_offered_too(tmp_path: Path) -> None:
    async with run_dsh(tmp_path) as dsh:
        with anyio.fail_after(WAIT):
            init = await initialize(dsh, terminal=True)
            await dsh.conn.authenticate(method_id="dsh-local")  # the agent method still works
    methods = init.auth_methods or []
    assert [type(m) for m in methods] == [TerminalAuthMethod, AuthMethodAgent]
    terminal = methods[0]
    assert isinstance(terminal, TerminalAuthMethod)
    assert (terminal.type, terminal.id, terminal.args) == ("terminal", "dsh-setup", ["setup"])
    assert "dsh setup" in (terminal.description or "")


@pytest.mark.parametrize(
    ("model", "variable"), [("openai:gpt-4.1-mini", "OPENAI_API_KEY"), ("deepseek:deepseek-chat", "DEEPSEEK_API_KEY")]
)
async def test_a_keyless_real_model_answers_auth_required_and_the_daemon_keeps_serving(
    tmp_path: Path, model: str, variable: str
) -> None:
    async with run_dsh(tmp_path, model, env={variable: None, "OPENAI_BASE_URL": None}) as dsh:
        with anyio.fail_after(WAIT):
            await initialize(dsh, terminal=False)
            session_id = await dsh.new_session()
            for _ in range(2):
                with pytest.raises(RequestError) as caught:
                    await dsh.prompt(session_id, "hello")
                assert caught.value.code == AUTH_REQUIRED
                assert variable in str(caught.value) and "dsh setup" in str(caught.value)
            with pytest.raises(RequestError) as caught:
                await dsh.conn.authenticate(method_id="dsh-local")
            assert caught.value.code == AUTH_REQUIRED
            assert (caught.value.data or {}).get("missing") == variable
            with pytest.raises(RequestError) as caught:
                await dsh.conn.authenticate(method_id="no-such-method")
            assert caught.value.code == -32602


async def test_logout_then_authenticate(tmp_path: Path) -> None:
    """With a key present: after ``logout`` a prompt to a keyed model answers auth-required (no call is made);
    ``authenticate`` restores it. The echo model needs no key and is never refused."""
    async with run_dsh(tmp_path, "deepseek:deepseek-chat", env={"DEEPSEEK_API_KEY": "sk-test-not-used"}) as dsh:
        with anyio.fail_after(WAIT):
            await initialize(dsh, terminal=False)
            session_id = await dsh.new_session()
            assert await dsh.conn._conn.send_request("logout", {}) == {}
            with pytest.raises(RequestError) as caught:
                await dsh.prompt(session_id, "hello")
            assert caught.value.code == AUTH_REQUIRED and "logged out" in str(caught.value)
            assert await dsh.conn.authenticate(method_id="dsh-local") is not None
    (tmp_path / "echo").mkdir()
    async with run_dsh(tmp_path / "echo", "echo") as echo:
        with anyio.fail_after(WAIT):
            await initialize(echo, terminal=False)
            assert await echo.conn._conn.send_request("logout", {}) == {}
            session_id = await echo.new_session()
            assert (await echo.prompt(session_id, "hi")).stop_reason == "end_turn"
