"""MCP servers cannot wedge or bloat a session (issue #30 item 4), against a raw hostile server
(:mod:`tests.support.mcp_hostile`) and the daemon driven by the SDK client (:mod:`tests.support.editor`)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import anyio
from acp.schema import EnvVariable, McpServerStdio

from tests.support.editor import (
    DEADLINE,
    Editor,
    EditorClient,
    call,
    read_log,
    run_editor,
    text_of,
    tool_results,
    write_script,
)
from tests.support.mcp_hostile import hostile_server
from tests.support.mcp_probe import requests
from tests.support.timing import promised

PROBE = "tests.support.mcp_probe:plugin"
FLOOD_SECONDS = os.environ.get("DSH_TEST_FLOOD_SECONDS", "2")
"""The issue's figure is 10 s (``DSH_TEST_FLOOD_SECONDS=10``); 2 s already writes several times the 128 MiB line
limit on one core, which is all the bound needs, and keeps the suite fast."""
KEY = "sk-hostile-mcp-0123456789abcdefghijklmnopqrs"


def server(directory: Path, *flags: str, name: str = "bad") -> McpServerStdio:
    directory.mkdir(exist_ok=True)
    entry = hostile_server(str(directory), *flags, name=name)
    return McpServerStdio(
        name=entry["name"], command=entry["command"], args=entry["args"], env=[EnvVariable(**e) for e in entry["env"]]
    )


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"DSH_PLUGINS": PROBE, "DSH_PROBE_FILE": str(tmp_path / "probe.jsonl"), "DSH_MCP_TIMEOUT": "30", **extra}


async def bypass_session(editor: Editor, servers: list[Any]) -> str:
    with anyio.fail_after(DEADLINE):
        session = (await editor.conn.new_session(cwd=str(editor.project), mcp_servers=servers)).session_id
        await editor.conn.set_session_mode(session_id=session, mode_id="bypass")  # bypass never asks
    return session


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (not reaped yet by whoever adopted it) is gone for our purposes
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


async def gone(pid: int, seconds: float = 5.0) -> None:
    """Until process *pid* is gone (another process: no event to wait on, so poll, bounded)."""
    with anyio.fail_after(seconds):
        while alive(pid):  # noqa: ASYNC110
            await anyio.sleep(0.05)


async def wait_file(path: Path, seconds: float = DEADLINE) -> None:
    with anyio.fail_after(seconds):
        while not await anyio.Path(path).exists():  # noqa: ASYNC110 (another process makes it: poll, bounded)
            await anyio.sleep(0.02)


async def test_a_result_deeper_than_the_json_limit_is_an_error_result_at_once(tmp_path: Path) -> None:
    model = write_script(tmp_path / "script.json", [call("mcp__bad__deep", "d1", depth=200), {"text": "after"}])
    async with run_editor(tmp_path, model, EditorClient(), env=env(tmp_path)) as editor:
        session = await bypass_session(editor, [server(tmp_path / "srv")])
        async with anyio.create_task_group() as group:
            responses: list[Any] = []

            async def prompt() -> None:
                responses.append(await editor.prompt(session, "go deep"))

            group.start_soon(prompt)
            await editor.wait(lambda: bool(editor.tool_updates(session, "d1")))  # the call is out
            started = time.monotonic()
            await editor.wait(lambda: editor.ended(session, "d1"))
            answered_in = time.monotonic() - started
        assert responses[0].stop_reason == "end_turn"
        final = editor.final(session, "d1")
        assert final["status"] == "failed"
        assert "nested deeper than" in text_of(final)
    assert answered_in < promised(1.0), answered_in  # the issue: within a second (a loaded machine's margin)
    (result,) = tool_results(read_log(tmp_path, session), "d1")
    assert result["is_error"] is True


async def test_a_duplicate_tool_name_is_skipped_visibly_and_the_rest_register(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "script.json",
        [
            {
                "tool_calls": [
                    {"name": "mcp__bad__first", "id": "t1", "arguments": {}},
                    {"name": "mcp__bad__dup", "id": "t2", "arguments": {}},
                    {"name": "mcp__bad__later", "id": "t3", "arguments": {}},
                    {"name": "mcp__bad__last", "id": "t4", "arguments": {}},
                    {"name": "mcp__bad__echo", "id": "t5", "arguments": {"text": "hi"}},
                ]
            },
            {"text": "done"},
        ],
    )
    async with run_editor(tmp_path, model, EditorClient(), env=env(tmp_path)) as editor:
        session = await bypass_session(editor, [server(tmp_path / "srv", "--duplicate")])
        with anyio.fail_after(DEADLINE):
            assert (await editor.prompt(session, "call them")).stop_reason == "end_turn"
        for call_id in ("t1", "t2", "t3", "t4"):
            assert text_of(editor.final(session, call_id)) == "ok", call_id
        assert text_of(editor.final(session, "t5")) == "hi"
        shown = json.dumps(editor.updates(session))
        assert "listed the tool `dup` twice; the second was skipped" in shown  # the user sees it
        stderr = editor.dsh.stderr()
    tools = requests(tmp_path / "probe.jsonl")[0]["tools"]
    assert [t for t in tools if t.startswith("mcp__bad__")].count("mcp__bad__dup") == 1
    assert "mcp__bad__last" in tools
    assert "mcp server listed a tool twice" in stderr


async def test_a_flood_without_newlines_keeps_memory_flat_and_the_server_usable(tmp_path: Path) -> None:
    model = write_script(tmp_path / "script.json", [call("mcp__bad__echo", "e1", text="after flood"), {"text": "done"}])
    directory = tmp_path / "srv"
    async with run_editor(tmp_path, model, EditorClient(), env=env(tmp_path)) as editor:
        pid = editor.dsh.process.pid
        before = rss(pid)
        session = await bypass_session(editor, [server(directory, "--flood", FLOOD_SECONDS)])
        peak = before
        with anyio.fail_after(30):
            while not await anyio.Path(directory / "flooded").exists():
                peak = max(peak, rss(pid))
                await anyio.sleep(0.1)
        peak = max(peak, rss(pid))
        with anyio.fail_after(DEADLINE):
            assert (await editor.prompt(session, "still there?")).stop_reason == "end_turn"
        assert text_of(editor.final(session, "e1")) == "after flood"
        stderr = editor.dsh.stderr()
    print(f"flood {FLOOD_SECONDS} s: RSS {before >> 20} -> peak {peak >> 20} MiB")
    assert peak - before < 64 * 1024 * 1024, (before, peak)
    assert "dsh cannot use; dropped it" in stderr and "more than the 134217728 dsh reads" in stderr
    assert len(stderr) < 1024 * 1024  # the flood did not reach the log whole


async def test_a_50_mb_result_is_budgeted_with_the_full_result_on_disk(tmp_path: Path) -> None:
    model = write_script(tmp_path / "script.json", [call("mcp__bad__big", "b1", size=50_000_000), {"text": "done"}])
    async with run_editor(tmp_path, model, EditorClient(), env=env(tmp_path)) as editor:
        session = await bypass_session(editor, [server(tmp_path / "srv")])
        with anyio.fail_after(60):
            assert (await editor.prompt(session, "big")).stop_reason == "end_turn"
        shown = text_of(editor.final(session, "b1"))
    assert len(shown) < 100_000
    lines = (tmp_path / "dsh-data" / f"{session}.jsonl").read_bytes().split(b"\n")
    assert max(map(len, lines)) < 1_000_000
    (result,) = tool_results(read_log(tmp_path, session), "b1")
    text = result["content"][0]["text"]
    assert text.startswith("B") and len(text) < 100_000
    spilled = Path(result["spill"])  # the tool pipeline's budget step kept the whole result on disk
    assert os.path.getsize(spilled) >= 50_000_000 and str(spilled) in text  # noqa: ASYNC240 (after the daemon)
    assert spilled.is_relative_to(tmp_path / "dsh-data")


async def test_a_key_a_server_prints_on_stderr_is_not_logged(tmp_path: Path) -> None:
    model = write_script(tmp_path / "script.json", [call("mcp__bad__ok", "k1"), {"text": "done"}])
    async with run_editor(
        tmp_path, model, EditorClient(), env=env(tmp_path, OPENAI_API_KEY=KEY, DSH_LOG_LEVEL="debug")
    ) as editor:
        entry = server(tmp_path / "srv", "--stderr-key")
        entry.env.append(EnvVariable(name="HOSTILE_KEY", value=KEY))
        session = await bypass_session(editor, [entry])
        with anyio.fail_after(DEADLINE):
            assert (await editor.prompt(session, "go")).stop_reason == "end_turn"
        with anyio.fail_after(DEADLINE):
            while "starting with key" not in editor.dsh.stderr():  # noqa: ASYNC110 (another process writes it)
                await anyio.sleep(0.02)
        stderr = editor.dsh.stderr()
    assert "starting with key [redacted OPENAI_API_KEY] loaded" in stderr
    assert KEY not in stderr


async def test_a_setsid_grandchild_of_a_server_ends_with_the_session_and_the_daemon(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "script.json",
        [call("mcp__bad__spawn", "s1"), {"text": "one"}, call("mcp__bad__spawn", "s2"), {"text": "two"}],
    )
    first, second = tmp_path / "srv1", tmp_path / "srv2"
    async with run_editor(tmp_path, model, EditorClient(), env=env(tmp_path)) as editor:
        closing = await bypass_session(editor, [server(first)])
        staying = await bypass_session(editor, [server(second)])
        with anyio.fail_after(DEADLINE):
            await editor.prompt(closing, "spawn")
            await editor.prompt(staying, "spawn")
        closed_grandchild = int((first / "grandchild").read_text())
        other_grandchild = int((second / "grandchild").read_text())
        assert alive(closed_grandchild) and alive(other_grandchild)
        with anyio.fail_after(DEADLINE):
            await editor.conn.close_session(session_id=closing)
        await gone(closed_grandchild)
        assert alive(other_grandchild)  # another session's descendants are not touched
    await gone(other_grandchild)


async def test_a_setsid_descendant_of_a_command_ends_with_the_session_and_the_daemon(tmp_path: Path) -> None:
    def escape(name: str) -> str:
        pidfile = tmp_path / "project" / f"{name}.pid"  # in the project: approved commands write only there
        return (
            f"setsid sh -c 'echo $$ > {pidfile}.tmp; mv {pidfile}.tmp {pidfile}; exec sleep 600' >/dev/null 2>&1 "
            f"</dev/null & while [ ! -s {pidfile} ]; do sleep 0.01; done; echo started"
        )

    model = write_script(
        tmp_path / "script.json",
        [
            call("run_command", "c1", command=escape("one")),
            {"text": "one"},
            call("run_command", "c2", command=escape("two")),
            {"text": "two"},
        ],
    )
    async with run_editor(tmp_path, model, EditorClient(), env=env(tmp_path)) as editor:
        closing = await bypass_session(editor, [])
        staying = await bypass_session(editor, [])
        with anyio.fail_after(DEADLINE):
            await editor.prompt(closing, "escape")
            await editor.prompt(staying, "escape")
        one, two = (int((tmp_path / "project" / f"{n}.pid").read_text()) for n in ("one", "two"))
        assert alive(one) and alive(two)
        with anyio.fail_after(DEADLINE):
            await editor.conn.close_session(session_id=closing)
        await gone(one)
        assert alive(two)
    await gone(two)
