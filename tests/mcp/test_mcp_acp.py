"""MCP servers end to end: real servers written with the SDK's server side (:mod:`tests.support.mcp_servers`), the
daemon as a subprocess driven by the official ACP SDK client (:mod:`tests.support.editor`), the scripted model,
and a probe plugin that records every model request (:mod:`tests.support.mcp_probe`).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import anyio
from acp.schema import EnvVariable, HttpMcpServer, McpServerStdio, SseMcpServer

from tests.support.editor import (
    DEADLINE,
    PERMISSION,
    Editor,
    EditorClient,
    call,
    read_log,
    run_editor,
    text_of,
    tool_results,
    write_script,
)
from tests.support.mcp_probe import requests
from tests.support.mcp_servers import hang_server, serve_http, stdio_server
from tests.support.timing import promised

PROBE = "tests.support.mcp_probe:plugin"
MAIN_TOOLS = {f"mcp__main__{t}" for t in ("echo", "add", "slow", "fail", "image", "lookup", "grow", "crash")}


def stdio(directory: Path, name: str = "main") -> McpServerStdio:
    entry = stdio_server(str(directory), name)
    return McpServerStdio(
        name=entry["name"], command=entry["command"], args=entry["args"], env=[EnvVariable(**e) for e in entry["env"]]
    )


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    # Start-up of a Python MCP server takes seconds on a loaded machine: good servers get a generous timeout
    # (the wait ends as soon as they are ready); the hanging one gets its own short one in the config file.
    return {"DSH_PLUGINS": PROBE, "DSH_PROBE_FILE": str(tmp_path / "probe.jsonl"), "DSH_MCP_TIMEOUT": "30", **extra}


def tools_call(*calls: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "id": call_id, "arguments": arguments} for name, call_id, arguments in calls]}


def asked(client: EditorClient) -> list[str]:
    return [p["toolCall"]["toolCallId"] for p in client.permissions()]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def wait_file(path: Path) -> None:
    """Until another process created *path* (no event crosses the process boundary: poll, bounded)."""
    with anyio.fail_after(DEADLINE):
        while not await anyio.Path(path).exists():  # noqa: ASYNC110
            await anyio.sleep(0.02)


async def new_session(editor: Editor, servers: list[Any]) -> tuple[str, float]:
    started = time.monotonic()
    with anyio.fail_after(DEADLINE):
        response = await editor.conn.new_session(cwd=str(editor.project), mcp_servers=servers)
    return response.session_id, time.monotonic() - started


async def test_stdio_tools_round_trip_ask_unless_read_only_refresh_and_stay_in_their_session(tmp_path: Path) -> None:
    served = tmp_path / "served"
    served.mkdir()
    model = write_script(
        tmp_path / "script.json",
        [
            tools_call(
                ("mcp__main__lookup", "c1", {"key": "k"}),
                ("mcp__main__echo", "c2", {"text": "hi"}),
                ("mcp__main__add", "c3", {"a": 2, "b": 3}),
                ("mcp__main__image", "c4", {}),
                ("mcp__main__fail", "c5", {"message": "no luck"}),
            ),
            call("mcp__main__grow", "c6"),
            call("mcp__main__extra", "c7"),
            {"text": "done"},
            {"text": "other session"},
            call("mcp__main__add", "c8", a=1, b=1),
            {"text": "again"},
        ],
    )
    client = EditorClient(["allow_once", "allow_always", "allow_once", "allow_once", "allow_once", "allow_once"])
    async with run_editor(tmp_path, model, client, env=env(tmp_path)) as editor:
        with_mcp, _ = await new_session(editor, [stdio(served)])
        without, _ = await new_session(editor, [])

        assert (await editor.prompt(with_mcp, "use the tools")).stop_reason == "end_turn"
        assert (await editor.prompt(without, "no tools here")).stop_reason == "end_turn"
        assert (await editor.prompt(with_mcp, "add again")).stop_reason == "end_turn"

        seen = requests(tmp_path / "probe.jsonl")
        assert len(seen) == 7
        assert set(seen[0]["tools"]) >= MAIN_TOOLS  # the first model call waited for the server
        assert "mcp__main__extra" not in seen[0]["tools"]
        assert "mcp__main__extra" in seen[2]["tools"]  # list_changed after `grow` was picked up
        assert not [t for t in seen[4]["tools"] if t.startswith("mcp__")]  # the other session sees none
        assert "read_file" in seen[4]["tools"] and "read_file" in seen[0]["tools"]  # built-ins stay

        # Permission: asked for every tool that is not read-only, never for `lookup`; "always" holds for `add`.
        assert asked(client) == ["c2", "c3", "c4", "c5", "c6", "c7"]
        lookup = editor.tool_updates(with_mcp, "c1")[0]
        assert lookup["title"] == "main: lookup" and lookup["kind"] == "read"
        echo_card = editor.tool_updates(with_mcp, "c2")[0]
        assert echo_card["sessionUpdate"] == "tool_call"
        assert echo_card["title"] == "main: echo" and echo_card["kind"] == "other"
        assert client.permissions()[0]["toolCall"]["title"] == "main: echo"

        assert text_of(editor.final(with_mcp, "c1")) == "value of k"
        assert text_of(editor.final(with_mcp, "c2")) == "echo: hi"
        assert text_of(editor.final(with_mcp, "c3")) == "5"
        assert "image" in text_of(editor.final(with_mcp, "c4")) and "omitted" in text_of(editor.final(with_mcp, "c4"))
        failed = editor.final(with_mcp, "c5")
        assert failed["status"] == "failed" and "no luck" in text_of(failed)
        assert text_of(editor.final(with_mcp, "c7")) == "extra works"
        assert text_of(editor.final(with_mcp, "c8")) == "2"

        pid = int((served / "pid-1").read_text())
        assert alive(pid)
        with anyio.fail_after(DEADLINE):
            await editor.conn.close_session(session_id=with_mcp)
        assert not alive(pid), "session/close left the MCP server running"
    log = read_log(tmp_path, with_mcp)
    (fail_result,) = tool_results(log, "c5")
    assert fail_result["is_error"] is True
    (echo_result,) = tool_results(log, "c2")
    assert echo_result["is_error"] is False and echo_result["content"] == [{"type": "text", "text": "echo: hi"}]


async def test_cancel_during_a_slow_tool_answers_cancelled_and_the_server_sees_the_cancel(tmp_path: Path) -> None:
    served = tmp_path / "served"
    served.mkdir()
    model = write_script(tmp_path / "script.json", [call("mcp__main__slow", "s1", seconds=60), {"text": "after"}])
    client = EditorClient()
    async with run_editor(tmp_path, model, client, env=env(tmp_path)) as editor:
        session, _ = await new_session(editor, [stdio(served)])
        with anyio.fail_after(DEADLINE):
            await editor.conn.set_session_mode(session_id=session, mode_id="bypass")  # bypass never asks
        async with anyio.create_task_group() as group:
            outcome: list[Any] = []

            async def prompt() -> None:
                outcome.append(await editor.prompt(session, "be slow"))

            group.start_soon(prompt)
            await wait_file(served / "slow-started")
            cancelled_at = time.monotonic()
            await editor.conn.cancel(session_id=session)
        assert outcome[0].stop_reason == "cancelled"
        assert time.monotonic() - cancelled_at < promised(1.0)  # the tool sleeps 60 s
        await wait_file(served / "slow-cancelled")  # the server got notifications/cancelled
        assert client.permissions() == []
        assert editor.final(session, "s1")["status"] == "failed"
        pid = int((served / "pid-1").read_text())
        assert alive(pid)  # the session stays open: its server lives on…
    assert not alive(pid), "the daemon exited and left its MCP server running"  # …until the daemon exits


async def test_a_hanging_server_costs_nothing_at_new_and_fails_visibly_once_http_and_sse_work(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    stuck = hang_server()
    config.write_text(
        f"mcp_servers:\n  stuck:\n    command: {stuck['command']}\n    args: {stuck['args']!r}\n".replace(
            "'", '"'
        ).replace("\\n", "\\n")
        + "    timeout: 1.0\n",
        encoding="utf-8",
    )
    model = write_script(
        tmp_path / "script.json",
        [
            tools_call(("mcp__web__ping", "h1", {"text": "a"}), ("mcp__old__ping", "e1", {"text": "b"})),
            {"text": "done"},
            {"text": "second"},
        ],
    )
    client = EditorClient(["allow_once", "allow_once"])
    with serve_http("streamable-http") as http_url, serve_http("sse") as sse_url:
        async with run_editor(tmp_path, model, client, env=env(tmp_path, DSH_CONFIG=str(config))) as editor:
            init = editor.frames()[0]["result"]["agentCapabilities"]["mcpCapabilities"]
            assert init == {"http": True, "sse": True}
            servers = [
                HttpMcpServer(type="http", name="web", url=http_url, headers=[]),
                SseMcpServer(type="sse", name="old", url=sse_url, headers=[]),
            ]
            await new_session(editor, [])  # the process's first session pays its lazy imports, with or without MCP
            session, _latency = await new_session(editor, servers)
            # session/new does not wait for the stuck server: the prompt below still waits for its 1 s timeout
            # (the assertion after it); what session/new costs is measured by scripts/bench_mcp.py
            started = time.monotonic()
            assert (await editor.prompt(session, "ping both")).stop_reason == "end_turn"
            assert time.monotonic() - started >= 0.9  # it waited for the stuck server's timeout…
            (first, *_rest) = requests(tmp_path / "probe.jsonl")
            assert {"mcp__web__ping", "mcp__old__ping"} <= set(first["tools"])  # …and went on with the others
            assert not [t for t in first["tools"] if t.startswith("mcp__stuck")]
            assert text_of(editor.final(session, "h1")) == "pong over streamable-http: a"
            assert text_of(editor.final(session, "e1")) == "pong over sse: b"
            assert (await editor.prompt(session, "again")).stop_reason == "end_turn"
            cards = [
                u
                for u in editor.updates(session)
                if u.get("sessionUpdate") == "tool_call" and u["title"].startswith("MCP server `stuck`")
            ]
            assert len(cards) == 1, cards  # once, not per prompt
            assert cards[0]["status"] == "failed"
            assert cards[0]["title"] == "MCP server `stuck` did not start: no answer within 1 s"
    stderr = (tmp_path / "dsh.stderr.log").read_text()
    assert "mcp server did not start" in stderr and "stuck" in stderr


async def test_a_server_crashing_mid_call_gives_an_error_result_and_is_restarted_once(tmp_path: Path) -> None:
    served = tmp_path / "served"
    served.mkdir()
    model = write_script(
        tmp_path / "script.json",
        [call("mcp__main__crash", "x1"), call("mcp__main__echo", "x2", text="back"), {"text": "survived"}],
    )
    client = EditorClient()
    async with run_editor(tmp_path, model, client, env=env(tmp_path)) as editor:
        session, _ = await new_session(editor, [stdio(served)])
        await editor.conn.set_session_mode(session_id=session, mode_id="bypass")
        response = await editor.prompt(session, "crash it")
        assert response.stop_reason == "end_turn"  # not a failed turn
        crashed = editor.final(session, "x1")
        assert crashed["status"] == "failed"
        assert "stopped during the call" in text_of(crashed)
        assert text_of(editor.final(session, "x2")) == "echo: back"  # restarted on the next call
        assert (served / "pid-2").exists()
        assert editor.client.text(session) == "survived"
    stderr = (tmp_path / "dsh.stderr.log").read_text()
    assert "crash: exiting on purpose" in stderr  # the server's stderr went to our log


async def test_load_replays_mcp_cards_and_connects_the_servers_the_load_request_gives(tmp_path: Path) -> None:
    served = tmp_path / "served"
    served.mkdir()
    first = write_script(tmp_path / "first.json", [call("mcp__main__echo", "l1", text="one"), {"text": "ok"}])
    async with run_editor(tmp_path, first, EditorClient(["allow_once"]), env=env(tmp_path)) as editor:
        session, _ = await new_session(editor, [stdio(served)])
        assert (await editor.prompt(session, "echo")).stop_reason == "end_turn"

    second = write_script(tmp_path / "second.json", [call("mcp__again__echo", "l2", text="two"), {"text": "ok"}])
    async with run_editor(tmp_path, second, EditorClient(["allow_once"]), env=env(tmp_path), name="second") as editor:
        with anyio.fail_after(DEADLINE):
            await editor.conn.load_session(
                cwd=str(editor.project), session_id=session, mcp_servers=[stdio(served, "again")]
            )
        replayed = editor.tool_updates(session, "l1")
        assert replayed[0]["sessionUpdate"] == "tool_call"
        assert replayed[-1]["title"] == "main: echo" and replayed[-1]["status"] == "completed"
        assert text_of(replayed[-1]) == "echo: one"
        assert (await editor.prompt(session, "echo again")).stop_reason == "end_turn"
        assert text_of(editor.final(session, "l2")) == "echo: two"
        tools = requests(tmp_path / "probe.jsonl")[-2]["tools"]
        assert "mcp__again__echo" in tools and "mcp__main__echo" not in tools


async def test_no_servers_no_sdk(tmp_path: Path) -> None:
    """A daemon that never sees a server never imports the MCP SDK."""
    model = write_script(tmp_path / "script.json", [{"text": "plain"}])
    async with run_editor(tmp_path, model, EditorClient(), env=env(tmp_path)) as editor:
        session, _ = await new_session(editor, [])
        assert (await editor.prompt(session, "hi")).stop_reason == "end_turn"
    (request,) = requests(tmp_path / "probe.jsonl")
    assert request["mcp_loaded"] is False
    assert PERMISSION not in [f.get("method") for f in editor.frames()]


async def test_resume_connects_the_servers_of_the_resume_request_without_replaying(tmp_path: Path) -> None:
    served = tmp_path / "served"
    served.mkdir()
    first = write_script(tmp_path / "first.json", [{"text": "stored"}])
    async with run_editor(tmp_path, first, EditorClient(), env=env(tmp_path)) as editor:
        session, _ = await new_session(editor, [])
        assert (await editor.prompt(session, "hello")).stop_reason == "end_turn"

    second = write_script(tmp_path / "second.json", [call("mcp__late__lookup", "r1", key="x"), {"text": "ok"}])
    async with run_editor(tmp_path, second, EditorClient(), env=env(tmp_path), name="second") as editor:
        with anyio.fail_after(DEADLINE):
            await editor.conn.resume_session(
                session_id=session, cwd=str(editor.project), mcp_servers=[stdio(served, "late")]
            )
        replayed = [u for u in editor.updates(session) if u["sessionUpdate"] != "available_commands_update"]
        assert replayed == []  # resume does not replay
        assert (await editor.prompt(session, "look it up")).stop_reason == "end_turn"
        assert text_of(editor.final(session, "r1")) == "value of x"  # read-only: no permission asked
        assert "mcp__late__lookup" in requests(tmp_path / "probe.jsonl")[-2]["tools"]


async def test_status_lists_the_sessions_mcp_servers_and_their_state(tmp_path: Path) -> None:
    served = tmp_path / "served"
    served.mkdir()
    model = write_script(tmp_path / "script.json", [{"text": "warmed up"}])
    async with run_editor(tmp_path, model, EditorClient(), env=env(tmp_path)) as editor:
        session_id, _ = await new_session(editor, [stdio(served)])
        assert (await editor.prompt(session_id, "hello")).stop_reason == "end_turn"  # waits for the server
        before = len(editor.client.chunk_texts(session_id))
        assert (await editor.prompt(session_id, "/status")).stop_reason == "end_turn"
        status = "".join(editor.client.chunk_texts(session_id)[before:])
    assert "MCP servers: main (ready)" in status.splitlines()


async def test_a_stdio_server_does_not_see_the_provider_keys(tmp_path: Path) -> None:
    """#17: an MCP stdio server dsh starts gets the daemon's environment minus its secrets (``child_environment``),
    plus the server's own ``env``; an ordinary variable still reaches it."""
    served = tmp_path / "served"
    served.mkdir()
    secrets = {"OPENAI_API_KEY": "sk-test-openai-0123456789", "ANTHROPIC_API_KEY": "sk-ant-test-0123456789"}
    model = write_script(tmp_path / "script.json", [{"text": "ready"}])
    daemon_env = env(tmp_path, ORDINARY_VARIABLE="plain-value", **secrets)
    async with run_editor(tmp_path, model, EditorClient(), env=daemon_env) as editor:
        session_id, _ = await new_session(editor, [stdio(served)])
        assert (await editor.prompt(session_id, "hello")).stop_reason == "end_turn"  # waits for the server
        await wait_file(served / "env-1")
    seen = json.loads((served / "env-1").read_text(encoding="utf-8"))
    assert seen.get("ORDINARY_VARIABLE") == "plain-value"
    assert "PYTHONPATH" in seen  # the server's own env entry
    for name, value in secrets.items():
        assert name not in seen
        assert all(value not in v for v in seen.values()), name
