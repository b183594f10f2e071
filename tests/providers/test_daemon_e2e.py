"""End to end: ``dsh acp`` with ``DSH_MODEL=openai:test-model`` against the fake OpenAI server, driven by the
official ACP SDK client, runs a tool round trip (the model calls a tool, then answers with its result)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from acp import spawn_agent_process, text_block
from acp.schema import ClientCapabilities, Implementation, PromptResponse, ToolCallProgress, ToolCallStart

from tests.support.provider_server import FakeProvider, Reply
from tests.support.provider_wire import DONE, oa_chunk, oa_finish, oa_text_reply, oa_tool_delta, oa_usage
from tests.support.sdk import RecordingClient
from tests.support.timing import promised

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"


def daemon_env(server: FakeProvider, tmp_path: Path) -> dict[str, str]:
    """Everything the daemon gets beyond the SDK's trimmed default environment (no real key, config or data)."""
    return {
        "PYTHONPATH": f"{HERE}{os.pathsep}{SRC}",
        "DSH_MODEL": "openai:test-model",
        "OPENAI_BASE_URL": f"{server.url}/v1",
        "OPENAI_API_KEY": "test",
        "DSH_DATA_DIR": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "DSH_PLUGINS": "e2e_shout_plugin:plugin",
    }


async def initialize(conn: Any, cwd: Path) -> str:
    await conn.initialize(
        protocol_version=1,
        client_capabilities=ClientCapabilities(),
        client_info=Implementation(name="dsh-provider-e2e", version="0"),
    )
    session_id: str = (await conn.new_session(cwd=str(cwd), mcp_servers=[])).session_id
    return session_id


async def test_the_daemon_runs_a_tool_round_trip_against_an_openai_compatible_server(
    server: FakeProvider, tmp_path: Path
) -> None:
    server.script(
        Reply(
            events=[
                oa_chunk({"role": "assistant", "content": None}),
                oa_tool_delta(0, "", "call_shout", "shout"),
                oa_tool_delta(0, '{"text": '),
                oa_tool_delta(0, '"hello"}'),
                oa_finish("tool_calls"),
                oa_usage(50, 10),
                DONE,
            ]
        ),
        Reply(events=oa_text_reply("The tool said ", "HELLO.")),
    )
    env = daemon_env(server, tmp_path)
    client = RecordingClient()
    with (tmp_path / "stderr.txt").open("w") as stderr:
        async with spawn_agent_process(
            client, sys.executable, "-m", "dsh", "acp", env=env, cwd=tmp_path, transport_kwargs={"stderr": stderr}
        ) as (conn, process):
            with anyio.fail_after(20):
                session_id = await initialize(conn, tmp_path)
                response = await conn.prompt(session_id=session_id, prompt=[text_block("shout hello")])
    log = (tmp_path / "stderr.txt").read_text()
    assert response.stop_reason == "end_turn", log
    assert process.returncode == 0, log
    updates = client.of(session_id)
    starts = [u for u in updates if isinstance(u, ToolCallStart)]
    assert [s.tool_call_id for s in starts] == ["call_shout"]
    finished = [u for u in updates if isinstance(u, ToolCallProgress) and u.status == "completed"]
    assert [u.tool_call_id for u in finished] == ["call_shout"]
    assert client.text(session_id) == "The tool said HELLO."

    first, second = server.requests
    assert first.path == "/v1/chat/completions"
    assert first.headers["authorization"] == "Bearer test"
    assert first.body["model"] == "test-model"
    assert "shout" in [t["function"]["name"] for t in first.body["tools"]]
    assert second.body["messages"][-2:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_shout",
                    "type": "function",
                    "function": {"name": "shout", "arguments": '{"text": "hello"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_shout", "content": "HELLO"},
    ]


async def test_a_slow_stream_cancelled_through_acp_closes_the_connection_at_once(
    server: FakeProvider, tmp_path: Path
) -> None:
    """``session/cancel`` from the editor reaches the model server as a closed connection within 100 ms."""
    server.script(
        Reply(
            events=[oa_chunk({"role": "assistant", "content": ""}), oa_chunk({"content": "Thinking slowly"})], hang=True
        )
    )
    client = RecordingClient()
    answer: list[PromptResponse] = []
    with (tmp_path / "stderr.txt").open("w") as stderr:
        async with spawn_agent_process(
            client,
            sys.executable,
            "-m",
            "dsh",
            "acp",
            env=daemon_env(server, tmp_path),
            cwd=tmp_path,
            transport_kwargs={"stderr": stderr},
        ) as (conn, _process):
            with anyio.fail_after(20):
                session_id = await initialize(conn, tmp_path)

                async def prompt() -> None:
                    answer.append(await conn.prompt(session_id=session_id, prompt=[text_block("go slowly")]))

                async with anyio.create_task_group() as group:
                    group.start_soon(prompt)
                    await client.wait_for_chunks(session_id)
                    cancelled_at = time.monotonic()
                    await conn.cancel(session_id=session_id)
                    closed_at = await server.wait_closed(server.requests[0].connection)
    log = (tmp_path / "stderr.txt").read_text()
    assert closed_at - cancelled_at < promised(0.1), log  # the reply hangs: only the cancel closes it
    assert [a.stop_reason for a in answer] == ["cancelled"], log
    assert client.text(session_id) == "Thinking slowly"
