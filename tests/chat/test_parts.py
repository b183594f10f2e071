"""The chat's parts without a terminal or an agent: session state, mentions, completion, cards, terminals, the
JSON-RPC connection, and what ``import dsh.chat`` costs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from rich.console import Console

from dsh.chat._commands import all_commands, parse_local
from dsh.chat._complete import ChatCompleter
from dsh.chat._mentions import MAX_EMBED, prompt_blocks
from dsh.chat._render import diff_lines, permission_keys, tool_card
from dsh.chat._rpc import Connection, RpcError
from dsh.chat._state import SessionState
from dsh.chat._terminals import Terminals
from tests.support.env import SRC

MODES = {
    "id": "mode",
    "name": "Mode",
    "category": "mode",
    "type": "select",
    "currentValue": "default",
    "options": [{"value": "default", "name": "Default"}, {"value": "plan", "name": "Plan", "description": "Read-only"}],
}
MODELS = {
    "id": "model",
    "category": "model",
    "type": "select",
    "currentValue": "a:1",
    "options": [
        {"group": "a", "name": "A", "options": [{"value": "a:1", "name": "One"}, {"value": "a:2", "name": "Two"}]}
    ],
}
OPTIONS = [
    {"optionId": "allow_once", "name": "Allow", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Always", "kind": "allow_always"},
    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
]


def render(renderable: Any, width: int = 80) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def test_state_keeps_snapshots_and_says_usage_and_cost() -> None:
    state = SessionState(session_id="s")
    state.apply_setup({"configOptions": [MODELS, MODES]})
    assert state.choices("model") == [("a:1", "One", ""), ("a:2", "Two", "")]  # groups flattened
    state.apply(
        {"sessionUpdate": "usage_update", "used": 1234, "size": 128000, "cost": {"amount": 0.0031, "currency": "USD"}}
    )
    assert state.status_line() == "a:1 · Default · context 1% (1.2k/128.0k) · $0.0031"
    state.apply({"sessionUpdate": "config_option_update", "configOptions": [{**MODES, "currentValue": "plan"}]})
    assert state.current("mode") == "plan" and state.option("model") is None  # the full list replaces
    state.apply({"sessionUpdate": "plan", "entries": [{"content": "a", "status": "pending", "priority": "low"}]})
    state.apply({"sessionUpdate": "plan", "entries": []})
    assert state.plan == []


def test_local_commands_only_take_what_the_chat_can_do() -> None:
    state = SessionState(session_id="s")
    assert parse_local("/model", state) is None  # no choices: the agent's /model answers
    state.apply_setup({"configOptions": [MODELS, MODES]})
    assert parse_local("/model", state) is not None and parse_local("/model", state).argument == ""  # type: ignore[union-attr]
    assert parse_local("/model Two", state).argument == "a:2"  # type: ignore[union-attr]
    assert parse_local("/model nosuch", state) is None  # goes to the agent as typed
    assert parse_local("/quit", state) is not None and parse_local("/status", state) is None
    state.apply(
        {
            "sessionUpdate": "available_commands_update",
            "availableCommands": [{"name": "model", "description": "agent's"}],
        }
    )
    names = [name for name, _, _ in all_commands(state)]
    assert names.count("model") == 1 and names[0] == "model" and "quit" in names


def test_mentions_embed_files_link_big_ones_and_skip_non_files(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("print(1)\n")
    (tmp_path / "big.txt").write_bytes(b"x" * (MAX_EMBED + 1))
    (tmp_path / "dir").mkdir()
    blocks = prompt_blocks("see @a.py, @a.py @big.txt @dir @missing me@a.py", str(tmp_path), embed=True)
    assert blocks[0] == {"type": "text", "text": "see @a.py, @a.py @big.txt @dir @missing me@a.py"}
    assert blocks[1] == {
        "type": "resource",
        "resource": {"uri": (tmp_path / "a.py").as_uri(), "text": "print(1)\n", "mimeType": "text/x-python"},
    }
    assert blocks[2]["type"] == "resource_link" and blocks[2]["size"] == MAX_EMBED + 1
    assert len(blocks) == 3  # a.py once; dir, missing and an e-mail-like word add nothing
    linked = prompt_blocks("@a.py", str(tmp_path), embed=False)
    assert linked[1]["type"] == "resource_link" and linked[1]["uri"] == (tmp_path / "a.py").as_uri()


def test_completion_of_commands_and_paths(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.py").write_text("")
    (tmp_path / ".hidden").write_text("")
    state = SessionState(session_id="s")
    state.apply(
        {"sessionUpdate": "available_commands_update", "availableCommands": [{"name": "status", "description": "d"}]}
    )
    completer = ChatCompleter(lambda: state, str(tmp_path))

    def complete(text: str) -> list[str]:
        return [c.text for c in completer.get_completions(Document(text), CompleteEvent(completion_requested=True))]

    assert complete("/st") == ["/status"]
    assert complete("say /st") == []  # commands only as the first word
    assert complete("look at @s") == ["@src/"]
    assert complete("look at @src/m") == ["@src/main.py"]
    assert complete("@") == ["@src/"]  # dot-files hidden
    assert complete("@.h") == ["@.hidden"]
    assert complete("@nowhere/x") == []


def test_cards_bound_diffs_and_show_command_output_tails() -> None:
    old = "\n".join(f"line {n}" for n in range(100))
    new = "\n".join(f"LINE {n}" for n in range(100))
    lines = diff_lines("f.txt", old, new)
    assert len(lines) == 41 and lines[-1].plain.startswith("… ")
    card = {
        "toolCallId": "c1",
        "title": "Run tests",
        "kind": "execute",
        "status": "completed",
        "rawInput": {"command": "make test"},
        "content": [
            {"type": "terminal", "terminalId": "t1"},
            {"type": "content", "content": {"type": "text", "text": "the agent's own copy of the output"}},
        ],
    }
    output = "\n".join(f"out {n}" for n in range(20))
    text = render(tool_card(card, {"t1": output}))
    assert "✔ Run tests · execute" in text and "$ make test" in text
    assert "out 19" in text and "out 11" not in text and "12 earlier lines" in text
    assert "own copy" not in text  # the output is shown once, from the terminal the chat ran
    edit = {
        "toolCallId": "c2",
        "title": "Edit",
        "kind": "edit",
        "status": "failed",
        "content": [{"type": "diff", "path": "/w/a.txt", "oldText": None, "newText": "hi\n"}],
    }
    text = render(tool_card(edit, {}, cwd="/w"))
    assert "✘ Edit · edit · failed" in text and "+++ b/a.txt" in text and "+hi" in text


def test_permission_keys() -> None:
    assert permission_keys(OPTIONS) == {
        "y": "allow_once",
        "a": "allow_always",
        "n": "reject_once",
        "1": "allow_once",
        "2": "allow_always",
        "3": "reject_once",
    }
    modes = [
        {"optionId": "default", "name": "Default", "kind": "allow_once"},
        {"optionId": "stay", "name": "No", "kind": "reject_once"},
    ]
    assert permission_keys(modes)["y"] == "default" and permission_keys(modes)["2"] == "stay"


async def test_terminals_truncate_from_the_start_at_a_character_boundary(tmp_path: Path) -> None:
    async with anyio.create_task_group() as task_group:
        terminals = Terminals(task_group, str(tmp_path))
        script = "import sys; sys.stdout.write('a' * 10 + 'é' * 10); sys.exit(3)"
        created = await terminals.handle(
            "terminal/create", {"command": sys.executable, "args": ["-c", script], "outputByteLimit": 7}
        )
        ids = {"terminalId": created["terminalId"]}
        with anyio.fail_after(10):
            assert await terminals.handle("terminal/wait_for_exit", ids) == {"exitCode": 3}
        output = await terminals.handle("terminal/output", ids)
        assert output == {"output": "ééé", "truncated": True, "exitStatus": {"exitCode": 3}}
        assert await terminals.handle("terminal/release", ids) == {}
        with pytest.raises(RpcError) as error:
            await terminals.handle("terminal/output", ids)
        assert error.value.code == -32002


async def test_terminals_do_not_pass_provider_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0123456789abcdef")
    async with anyio.create_task_group() as task_group:
        terminals = Terminals(task_group, str(tmp_path))
        script = "import os; print(os.environ.get('OPENAI_API_KEY', 'absent'), os.environ.get('EXTRA'))"
        created = await terminals.handle(
            "terminal/create",
            {"command": sys.executable, "args": ["-c", script], "env": [{"name": "EXTRA", "value": "x"}]},
        )
        ids = {"terminalId": created["terminalId"]}
        with anyio.fail_after(10):
            await terminals.handle("terminal/wait_for_exit", ids)
        assert (await terminals.handle("terminal/output", ids))["output"] == "absent x\n"


async def test_connection_answers_each_request_once_and_fails_pending_ones_on_eof() -> None:
    to_agent_send, to_agent_receive = anyio.create_memory_object_stream[bytes](100)
    from_agent_send, from_agent_receive = anyio.create_memory_object_stream[bytes](100)

    async def on_request(method: str, params: Any) -> Any:
        if method == "boom":
            raise ValueError("secret detail")
        if method == "bad":
            raise RpcError(-32602, "Invalid params")
        return {"echo": params}

    notes: list[str] = []
    connection = Connection(
        _Send(to_agent_send),
        _Receive(from_agent_receive),
        on_request=on_request,
        on_notification=lambda m, p: notes.append(m),
    )
    with anyio.fail_after(5):
        async with to_agent_send, to_agent_receive, from_agent_receive, anyio.create_task_group() as task_group:
            task_group.start_soon(connection.run, task_group)
            for frame in (
                {"jsonrpc": "2.0", "id": "x", "method": "ok", "params": {"a": 1}},
                {"jsonrpc": "2.0", "id": 2, "method": "boom"},
                {"jsonrpc": "2.0", "id": 3, "method": "bad"},
                {"jsonrpc": "2.0", "method": "note"},
            ):
                await from_agent_send.send(orjson.dumps(frame) + b"\n")
            answers = [orjson.loads((await to_agent_receive.receive()).rstrip(b"\n")) for _ in range(3)]
            by_id = {a["id"]: a for a in answers}
            assert by_id["x"]["result"] == {"echo": {"a": 1}}
            assert by_id[2]["error"] == {"code": -32603, "message": "Internal error"}  # no exception text leaks
            assert by_id[3]["error"]["code"] == -32602
            assert notes == ["note"]

            async def ask() -> None:
                with pytest.raises(ConnectionError):
                    await connection.request("session/prompt", {})

            task_group.start_soon(ask)
            await to_agent_receive.receive()  # the request went out
            await from_agent_send.aclose()  # the agent's stdout ends: the pending request fails


class _Send:
    def __init__(self, stream: Any) -> None:
        self.stream = stream

    async def send(self, data: bytes) -> None:
        await self.stream.send(data)


class _Receive:
    def __init__(self, stream: Any) -> None:
        self.stream = stream

    async def receive(self, max_bytes: int = 65536) -> bytes:
        try:
            return bytes(await self.stream.receive())
        except anyio.EndOfStream:
            raise anyio.EndOfStream from None

    async def aclose(self) -> None:
        await self.stream.aclose()


def test_import_dsh_chat_loads_no_terminal_library() -> None:
    code = "import sys, dsh.chat; print(sorted(m for m in sys.modules if m.split('.')[0] in ('rich', 'prompt_toolkit', 'typer', 'pydantic', 'acp')))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PYTHONPATH": str(SRC)}
    )
    assert out.stdout.strip() == "[]"


async def test_terminals_follow_the_config_files_secrets_section(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("secrets:\n  remove: ['MY_*']\n")
    monkeypatch.setenv("MY_SERVICE_TOKEN", "held-back")
    monkeypatch.setenv("OTHER_SETTING", "passes")
    async with anyio.create_task_group() as task_group:
        terminals = Terminals(task_group, str(tmp_path), str(config))
        script = "import os; print(os.environ.get('MY_SERVICE_TOKEN', 'absent'), os.environ.get('OTHER_SETTING'))"
        created = await terminals.handle("terminal/create", {"command": sys.executable, "args": ["-c", script]})
        ids = {"terminalId": created["terminalId"]}
        with anyio.fail_after(10):
            await terminals.handle("terminal/wait_for_exit", ids)
        assert (await terminals.handle("terminal/output", ids))["output"] == "absent passes\n"


async def test_a_live_card_spells_the_exit_code_as_a_resumed_one_does(tmp_path: Path) -> None:
    """Issue 43: one spelling, ``[exit code: N]`` (the tool's own result text, which a resumed card shows)."""
    from dsh.chat._transcript import Transcript

    transcript = Transcript(Console(width=80, record=True), SessionState, str(tmp_path))
    async with anyio.create_task_group() as task_group:
        terminals = Terminals(task_group, str(tmp_path))
        terminals.changed.append(transcript.on_terminal)
        created = await terminals.handle("terminal/create", {"command": "sh", "args": ["-c", "echo hi; exit 3"]})
        ids = {"terminalId": created["terminalId"]}
        with anyio.fail_after(10):
            await terminals.handle("terminal/wait_for_exit", ids)
        terminal = terminals.terminals[created["terminalId"]]
        transcript.on_terminal(terminal)
        await terminals.handle("terminal/release", ids)
    call = {"toolCallId": "c", "title": "run", "kind": "execute", "status": "completed"}
    call["content"] = [{"type": "terminal", "terminalId": created["terminalId"]}]
    console = Console(width=80, record=True)
    console.print(tool_card(call, transcript._terminal_text))
    assert console.export_text().splitlines()[-1].strip() == "[exit code: 3]"
