"""Start-up near the floor (issue #12 item 4): ``initialize`` is answered before the application is imported.

The daemon answers a plain first ``initialize`` with the standard library and anyio only (``_boot``), then
builds the application; these tests pin the set of modules imported when the answer is written, prove the
answer is the one the full stack gives, and that whatever is not a plain ``initialize`` still gets the full
stack's answer, in order.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from dsh.frontends.acp._boot import fast_initialize
from tests.support.env import SRC
from tests.support.raw import WAIT, RawDaemon, compact, daemon_env, spawn_daemon

PROBE = Path(__file__).resolve().parents[1] / "support" / "startup_probe.py"

BEFORE_THE_ANSWER = {
    "dsh",
    "dsh._entry",
    "dsh._log",
    "dsh.errors",
    "dsh.frontends",
    "dsh.frontends.acp",
    "dsh.frontends.acp._auth",
    "dsh.frontends.acp._boot",
    "dsh.frontends.acp._features",  # which newer capabilities the client advertised (standard library only)
    "dsh.frontends.acp._daemon",
    "dsh.jsonrpc",
    "dsh.jsonrpc._errors",
    "dsh.jsonrpc._ids",
    "dsh.jsonrpc._lines",
    "dsh.jsonrpc._stream",
    "dsh.frontends.acp._stdio",
    "dsh.frontends.acp._terminal",  # a person at a terminal is told to run `dsh chat` (standard library only)
    "dsh.images",  # whether the default model takes images (standard library only, the rest loaded lazily)
    "dsh.images._vision",
    "dsh.ownfiles",  # where the user's config directory is (RFC 0027: one place; ~1 ms, PyYAML loaded lazily)
    "dsh.ownfiles._dirs",
    "dsh.ownfiles._frontmatter",
    "dsh.ownfiles._read",
    "dsh.settings",
}
"""Every dsh module imported when the answer to ``initialize`` is written: the daemon's entry, the settings
resolution (without a configuration file), its stdio, the framer and the boot answer. The application (kernel, services, loop, providers, tools, persistence, the front
end, its pydantic models and jsonrpcserver) comes after."""

NEVER_BEFORE = (
    "pydantic",
    "pydantic_core",
    "jsonrpcserver",
    "jsonschema",
    "oslash",
    "structlog",
    "rich",
    "httpx",
    "httpcore",
    "yaml",
    "typer",
    "click",
)

INITIALIZE = {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True}}}


def test_initialize_is_answered_before_the_application_is_imported(tmp_path: Path) -> None:
    out = tmp_path / "modules.txt"
    request = compact({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INITIALIZE})
    env = daemon_env(extra={"DSH_DATA_DIR": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config")})
    env["PYTHONPATH"] = str(SRC)
    result = subprocess.run(
        [sys.executable, str(PROBE), str(out)],
        input=(request + "\n").encode(),
        capture_output=True,
        env=env,
        timeout=30,
        check=True,
    )
    assert b'"protocolVersion":1' in result.stdout.split(b"\n")[0]
    modules = set(out.read_text().split())
    assert "dsh.frontends.acp._boot" in modules  # the probe saw the answer (no vacuous pass)
    assert {m for m in modules if m == "dsh" or m.startswith("dsh.")} == BEFORE_THE_ANSWER
    assert sorted(m for m in modules if m.split(".")[0] in NEVER_BEFORE) == []


STEER = {"dsh.dev/steer": {"method": "_dsh/session/steer"}}
ASK_FOR_AGENT_EVENTS = {"protocolVersion": 1, "clientCapabilities": {"_meta": {"dsh.dev/agentEvents": True}}}


@pytest.mark.parametrize(
    ("params", "env", "meta"),
    [
        (INITIALIZE, {}, STEER),  # the steering extension request is advertised to every client (RFC 0036)
        (ASK_FOR_AGENT_EVENTS, {}, {**STEER, "dsh.dev/agentEvents": True}),  # a plugin's initialize hook, asked for
        (INITIALIZE, {"DSH_AGENT_EVENTS": "1"}, {**STEER, "dsh.dev/agentEvents": True}),  # ... and forced
    ],
    ids=["plain", "agent-events-asked", "agent-events-forced"],
)
async def test_the_boot_answer_is_the_full_stacks_answer_and_the_daemon_serves_on(
    tmp_path: Path, params: dict[str, Any], env: dict[str, str], meta: dict[str, Any] | None
) -> None:
    stderr = tmp_path / "stderr.log"
    async with spawn_daemon(stderr_path=stderr, env=env) as fresh:
        with anyio.fail_after(WAIT):
            first = await fresh.request("initialize", params, request_id="boot")  # answered by _boot
            second = await fresh.request("initialize", params, request_id="later")  # by the front end
            assert first["id"] == "boot" and second["id"] == "later"
            assert first["result"] == second["result"]
            assert first["result"]["agentCapabilities"]["loadSession"] is True
            assert first["result"]["agentCapabilities"].get("_meta") == meta
            session_id = await fresh.new_session(str(tmp_path))
            if meta == STEER:  # (with agent events on, the prompt's frames include _dsh/agent/* notifications)
                response, updates = await fresh.prompt(session_id, "hello there")
                assert response["result"] == {"stopReason": "end_turn"}
                chunks = [u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"]
                assert "".join(chunks) == "hello there"
    assert "differs" not in stderr.read_text()  # the daemon's own check of the boot answer


NOT_PLAIN = [
    b"not json",
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1.0}}',
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05"}}',
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":true}}',
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocol_version":1}}',
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":null}}',
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":[]}}',
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"x":NaN}}',
    b'{"jsonrpc":"2.0","id":1.5,"method":"initialize","params":{"protocolVersion":1}}',
    b'{"jsonrpc":"2.0","id":null,"method":"initialize","params":{"protocolVersion":1}}',
    b'{"jsonrpc":"2.0","method":"initialize","params":{"protocolVersion":1}}',
    b'{"jsonrpc":"1.0","id":1,"method":"initialize","params":{"protocolVersion":1}}',
    b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}',
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"_meta":"m"}}',
    b'\xff{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}',
]


@pytest.mark.parametrize("frame", NOT_PLAIN)
def test_fast_initialize_leaves_anything_but_a_plain_initialize_to_the_full_stack(frame: bytes) -> None:
    assert fast_initialize(frame, durable=True) is None


def _answers(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The responses among *messages*, with generated session ids made comparable."""
    answers = []
    for message in messages:
        if "method" in message:
            continue
        result = message.get("result")
        if isinstance(result, dict) and "sessionId" in result:
            message = {**message, "result": {**result, "sessionId": "<generated>"}}
        answers.append(message)
    return answers


async def _answers_to(daemon: RawDaemon, frame: bytes) -> list[dict[str, Any]]:
    await daemon.send_line(frame)
    await daemon.send({"jsonrpc": "2.0", "id": "probe", "method": "authenticate", "params": {}})
    messages: list[dict[str, Any]] = []
    while not messages or messages[-1].get("id") != "probe":
        messages.append(await daemon.read())
    return _answers(messages[:-1])


async def test_a_first_frame_that_is_not_a_plain_initialize_gets_the_full_stacks_answer(tmp_path: Path) -> None:
    frames = [NOT_PLAIN[0], NOT_PLAIN[2], NOT_PLAIN[6], NOT_PLAIN[12]]
    later: list[list[dict[str, Any]]] = []
    async with spawn_daemon(stderr_path=tmp_path / "later.log") as daemon:
        with anyio.fail_after(WAIT):
            await daemon.initialize()  # answered at boot; what follows is the full stack's
            later.extend([await _answers_to(daemon, frame) for frame in frames])
    for index, frame in enumerate(frames):
        async with spawn_daemon(stderr_path=tmp_path / f"first-{index}.log") as daemon:
            with anyio.fail_after(WAIT):
                first = await _answers_to(daemon, frame)
        assert first == later[index], frame
        assert len(first) == 1


@pytest.mark.parametrize(
    "params",
    [
        {"protocolVersion": 1},
        {"protocolVersion": 1, "clientCapabilities": {}, "clientInfo": None, "_meta": None},
        {"protocolVersion": 7, "clientCapabilities": {"terminal": True}, "clientInfo": {"name": "z"}, "extra": 1},
    ],
)
def test_fast_initialize_answers_plain_initialize(params: dict[str, Any]) -> None:
    frame = compact({"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": params}).encode()
    answered = fast_initialize(frame, durable=False)
    assert answered is not None
    response, seen = answered
    assert seen == params
    assert response.startswith(b'{"jsonrpc":"2.0","result":{"protocolVersion":1,')
    assert response.endswith(b',"id":3}')
