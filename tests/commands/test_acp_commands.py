"""Slash commands over ACP, with the official SDK client against a real daemon (``tests.support.sdk``).

Every frame the daemon writes is validated against the SDK's schema models when each daemon ends.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
from acp.schema import (
    AgentMessageChunk,
    AvailableCommandsUpdate,
    ConfigOptionUpdate,
    CurrentModeUpdate,
    TextContentBlock,
    UserMessageChunk,
)

from tests.support.sdk import DshProcess, run_dsh, write_script

WAIT = 15.0
HERE = Path(__file__).resolve().parent
"""On the daemon's ``PYTHONPATH``: the test plugins next to this file."""
BUILTINS = [
    "help",
    "status",
    "model",
    "mode",
    "compact",
    "clear",
    "init",
    "budget",
    "agents",
    "skills",
    "rewind",
    "sandbox",
    "worktree",
]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def command_updates(daemon: DshProcess, session_id: str) -> list[tuple[int, dict[str, Any]]]:
    return [(i, u) for i, u in daemon.update_frames(session_id) if u["sessionUpdate"] == "available_commands_update"]


def offered(update: dict[str, Any]) -> list[str]:
    return [c["name"] for c in update["availableCommands"]]


async def run(daemon: DshProcess, session_id: str, text: str) -> tuple[str, str]:
    """Send *text*; return the prompt's stop reason and the agent text it produced."""
    before = len(daemon.client.chunk_texts(session_id))
    with anyio.fail_after(WAIT):
        response = await daemon.prompt(session_id, text)
    return response.stop_reason, "".join(daemon.client.chunk_texts(session_id)[before:])


async def test_commands_are_announced_after_the_new_session_response(tmp_path: Path) -> None:
    async with run_dsh(tmp_path) as daemon:
        with anyio.fail_after(WAIT):
            session_id = await daemon.start()
            await daemon.client.wait_until(
                lambda: any(isinstance(u, AvailableCommandsUpdate) for u in daemon.client.of(session_id))
            )
        new_id = next(i for i, m in daemon.requests().items() if m == "session/new")
        announced = command_updates(daemon, session_id)
        assert len(announced) == 1
        position, update = announced[0]
        assert position > daemon.response_index(new_id)
        assert offered(update) == BUILTINS
        hints = {c["name"]: c.get("input", {}).get("hint") for c in update["availableCommands"]}
        assert hints["model"] == "[model id]" and hints["help"] is None


async def test_commands_are_announced_after_load_replay_and_after_resume(tmp_path: Path) -> None:
    async with run_dsh(tmp_path, name="first") as daemon:
        with anyio.fail_after(WAIT):
            session_id = await daemon.start()
            assert (await run(daemon, session_id, "hello there"))[0] == "end_turn"
    async with run_dsh(tmp_path, name="loader") as daemon:
        with anyio.fail_after(WAIT):
            await daemon.initialize()
            await daemon.conn.load_session(cwd=str(tmp_path), session_id=session_id, mcp_servers=[])
            await daemon.client.wait_until(
                lambda: any(isinstance(u, AvailableCommandsUpdate) for u in daemon.client.of(session_id))
            )
        load_id = next(i for i, m in daemon.requests().items() if m == "session/load")
        updates = daemon.update_frames(session_id)
        replayed = [i for i, u in updates if u["sessionUpdate"] in ("user_message_chunk", "agent_message_chunk")]
        ((position, _),) = command_updates(daemon, session_id)
        assert replayed and max(replayed) < daemon.response_index(load_id) < position
    async with run_dsh(tmp_path, name="resumer") as daemon:
        with anyio.fail_after(WAIT):
            await daemon.initialize()
            await daemon.conn.resume_session(cwd=str(tmp_path), session_id=session_id, mcp_servers=[])
            await daemon.client.wait_until(
                lambda: any(isinstance(u, AvailableCommandsUpdate) for u in daemon.client.of(session_id))
            )
        resume_id = next(i for i, m in daemon.requests().items() if m == "session/resume")
        ((position, _),) = command_updates(daemon, session_id)
        assert position > daemon.response_index(resume_id)


async def test_help_lists_every_command_and_status_describes_the_session(tmp_path: Path) -> None:
    async with run_dsh(tmp_path) as daemon:
        with anyio.fail_after(WAIT):
            session_id = await daemon.start()
        stop, text = await run(daemon, session_id, "/help")
        assert stop == "end_turn"
        for name in BUILTINS:
            assert f"- /{name}" in text
        assert "- /model [model id] — List the models, or switch to one" in text
        stop, text = await run(daemon, session_id, "/status")
        assert stop == "end_turn"
        lines = text.splitlines()
        assert f"Session: {session_id}" in lines
        assert f"Directory: {tmp_path}" in lines
        assert "Model: echo" in lines and "Mode: default" in lines
        assert "Context: 0 tokens (window unknown)" in lines
        assert f"Session file: {tmp_path / 'dsh-data' / (session_id + '.jsonl')}" in lines
        assert "MCP servers: none" in lines
        assert "Background commands: none" in lines


async def test_model_and_mode_commands_switch_exactly_as_the_pickers_do(tmp_path: Path) -> None:
    script = write_script(tmp_path / "other.json", [{"text": "from the other model"}])
    config = tmp_path / "home" / ".config" / "dsh" / "config.yaml"
    _write(config, f"models: [echo, '{script}']\n")
    async with run_dsh(tmp_path) as daemon:
        with anyio.fail_after(WAIT):
            session_id = await daemon.start()
        stop, listing = await run(daemon, session_id, "/model")
        assert stop == "end_turn"
        assert "- echo (current)" in listing and f"- {script}" in listing
        _, text = await run(daemon, session_id, f"/model {script}")
        assert text == f"Model switched to {script}."
        options = [u for u in daemon.client.of(session_id) if isinstance(u, ConfigOptionUpdate)]
        assert options and options[-1].config_options[0].current_value == script
        assert await run(daemon, session_id, "hello") == ("end_turn", "from the other model")
        _, text = await run(daemon, session_id, "/model nonsense")
        assert "model 'nonsense' is not offered" in text
        _, text = await run(daemon, session_id, "/mode plan")
        assert text == "Mode switched to plan."
        modes = [u for u in daemon.client.of(session_id) if isinstance(u, CurrentModeUpdate)]
        assert [m.current_mode_id for m in modes] == ["plan"]
        options = [u for u in daemon.client.of(session_id) if isinstance(u, ConfigOptionUpdate)]
        assert options[-1].config_options[1].current_value == "plan"
        _, text = await run(daemon, session_id, "/mode")
        assert "- plan — Plan: Read-only" in text and "(current)" in text.split("- plan")[1].splitlines()[0]


async def test_markdown_commands_from_the_project_and_the_user_directory(tmp_path: Path) -> None:
    _write(tmp_path / ".git" / "HEAD", "ref: refs/heads/main\n")
    _write(
        tmp_path / ".dsh" / "commands" / "greet.md",
        "---\ndescription: Greet\nargument-hint: <name>\n---\nHello $1, all: $ARGUMENTS",
    )
    user_dir = tmp_path / "home" / ".config" / "dsh" / "commands"
    _write(user_dir / "greet.md", "---\ndescription: shadowed\n---\nuser greet")
    _write(user_dir / "mine.md", "Mine: $ARGUMENTS")
    _write(tmp_path / ".dsh" / "commands" / "broken.md", "---\ndescription: [x\n---\nbody")
    async with run_dsh(tmp_path) as daemon:
        with anyio.fail_after(WAIT):
            session_id = await daemon.start()
            await daemon.client.wait_until(
                lambda: any(isinstance(u, AvailableCommandsUpdate) for u in daemon.client.of(session_id))
            )
        ((_, update),) = command_updates(daemon, session_id)
        entries = {c["name"]: c for c in update["availableCommands"]}
        assert list(entries) == [*BUILTINS, "greet", "mine"]
        assert entries["greet"]["description"] == "Greet" and entries["greet"]["input"] == {"hint": "<name>"}
        # the echo model streams the user's (expanded) message back
        assert await run(daemon, session_id, "/greet Ada Lovelace") == ("end_turn", "Hello Ada, all: Ada Lovelace")
        assert await run(daemon, session_id, "/mine a b") == ("end_turn", "Mine: a b")
        assert "skipped a command file" in daemon.stderr()


async def test_a_new_command_file_is_offered_without_a_restart(tmp_path: Path) -> None:
    async with run_dsh(tmp_path) as daemon:
        with anyio.fail_after(WAIT):
            session_id = await daemon.start()
        _write(tmp_path / ".dsh" / "commands" / "fresh.md", "fresh $ARGUMENTS")
        assert await run(daemon, session_id, "/fresh start") == ("end_turn", "fresh start")
        announced = command_updates(daemon, session_id)
        assert "fresh" in offered(announced[-1][1])


async def test_a_path_or_an_unknown_command_is_an_ordinary_prompt(tmp_path: Path) -> None:
    async with run_dsh(tmp_path) as daemon:
        with anyio.fail_after(WAIT):
            session_id = await daemon.start()
        assert await run(daemon, session_id, "/usr/bin/env") == ("end_turn", "/usr/bin/env")
        assert await run(daemon, session_id, "/nosuch thing") == ("end_turn", "/nosuch thing")


async def test_a_command_sent_mid_turn_waits_its_turn(tmp_path: Path) -> None:
    model = write_script(tmp_path / "slow.json", [{"text": "one two three four five six", "delay": 0.05}])
    async with run_dsh(tmp_path, model) as daemon:
        with anyio.fail_after(WAIT):
            session_id = await daemon.start()
            async with anyio.create_task_group() as group:
                answers: dict[str, str] = {}

                async def send(text: str) -> None:
                    answers[text] = (await daemon.prompt(session_id, text)).stop_reason

                group.start_soon(send, "slow one")
                await daemon.client.wait_for_chunks(session_id, 1)
                group.start_soon(send, "/help")
        assert answers == {"slow one": "end_turn", "/help": "end_turn"}
        slow_answer = daemon.response_index(daemon.prompt_request_id("slow one"))
        texts = [(i, u) for i, u in daemon.update_frames(session_id) if u["sessionUpdate"] == "agent_message_chunk"]
        help_chunks = [i for i, u in texts if u["content"]["text"].startswith("Commands:")]
        slow_chunks = [i for i, u in texts if not u["content"]["text"].startswith("Commands:")]
        assert len(help_chunks) == 1 and len(slow_chunks) == 6
        assert max(slow_chunks) < slow_answer < help_chunks[0]


async def test_a_cancel_covers_a_waiting_command(tmp_path: Path) -> None:
    model = write_script(tmp_path / "hang.json", [{"hang": True}])
    async with run_dsh(tmp_path, model) as daemon:
        with anyio.fail_after(WAIT):
            session_id = await daemon.start()
            answers: dict[str, str] = {}
            async with anyio.create_task_group() as group:

                async def send(text: str) -> None:
                    answers[text] = (await daemon.prompt(session_id, text)).stop_reason

                group.start_soon(send, "hang")
                await daemon.wait_sent_prompt("hang")
                group.start_soon(send, "/status")
                await daemon.wait_sent_prompt("/status")
                await daemon.conn.cancel(session_id=session_id)
        assert answers == {"hang": "cancelled", "/status": "cancelled"}
        assert not any("Session:" in t for t in daemon.client.chunk_texts(session_id))


async def test_commands_are_recorded_and_replayed_by_load(tmp_path: Path) -> None:
    async with run_dsh(tmp_path, name="first") as daemon:
        with anyio.fail_after(WAIT):
            session_id = await daemon.start()
        _, help_text = await run(daemon, session_id, "/help")
        await run(daemon, session_id, "/mode plan")
    async with run_dsh(tmp_path, name="loader") as daemon:
        with anyio.fail_after(WAIT):
            await daemon.initialize()
            await daemon.conn.load_session(cwd=str(tmp_path), session_id=session_id, mcp_servers=[])
        replay = [
            (type(u).__name__, u.content.text)
            for u in daemon.client.of(session_id)
            if isinstance(u, UserMessageChunk | AgentMessageChunk) and isinstance(u.content, TextContentBlock)
        ]
        assert replay == [
            ("UserMessageChunk", "/help"),
            ("AgentMessageChunk", help_text),
            ("UserMessageChunk", "/mode plan"),
            ("AgentMessageChunk", "Mode switched to plan."),
        ]


async def test_model_and_mode_choices_survive_a_restart_and_load(tmp_path: Path) -> None:
    script = write_script(tmp_path / "other.json", [{"text": "again"}])
    _write(tmp_path / "home" / ".config" / "dsh" / "config.yaml", f"models: [echo, '{script}']\n")
    async with run_dsh(tmp_path, name="first") as daemon:
        with anyio.fail_after(WAIT):
            session_id = await daemon.start()
            await daemon.conn.set_config_option(config_id="model", session_id=session_id, value=script)
            await daemon.conn.set_session_mode(mode_id="accept-edits", session_id=session_id)
    for method in ("load", "resume"):
        async with run_dsh(tmp_path, name=method) as daemon:
            with anyio.fail_after(WAIT):
                await daemon.initialize()
                if method == "load":
                    state: Any = await daemon.conn.load_session(
                        cwd=str(tmp_path), session_id=session_id, mcp_servers=[]
                    )
                else:
                    state = await daemon.conn.resume_session(cwd=str(tmp_path), session_id=session_id, mcp_servers=[])
            values = {o.id: o.current_value for o in state.config_options}
            assert values == {"model": script, "mode": "accept-edits"}
            assert state.modes.current_mode_id == "accept-edits"
            if method == "resume":
                assert await run(daemon, session_id, "hi") == ("end_turn", "again")


async def test_clear_hides_everything_before_it_from_the_model(tmp_path: Path) -> None:
    from tests.support.provider_server import Reply, serve
    from tests.support.provider_wire import oa_text_reply

    with serve() as server:
        server.script(Reply(events=oa_text_reply("first answer")), Reply(events=oa_text_reply("second answer")))
        env = {"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "test"}
        async with run_dsh(tmp_path, "openai:test-model", env=env) as daemon:
            with anyio.fail_after(WAIT):
                session_id = await daemon.start()
            assert (await run(daemon, session_id, "remember the word zebra"))[0] == "end_turn"
            stop, text = await run(daemon, session_id, "/clear")
            assert stop == "end_turn" and text.startswith("Context cleared")
            assert (await run(daemon, session_id, "what was the word?"))[0] == "end_turn"
        first, second = server.bodies()
        said = [m for m in second["messages"] if m["role"] != "system"]
        assert said[0] == {"role": "user", "content": "what was the word?"}, said
        # after the cleared history only the session note (date, mode: told again, as after a compaction) follows
        assert len(said) == 2 and said[1]["content"].startswith('<context source="session">Today'), said
        assert "zebra" not in str(second["messages"])
        assert "zebra" in str(first["messages"])


async def test_a_command_a_plugin_registers_mid_session_is_announced_and_runs(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "late.json",
        [{"tool_calls": [{"name": "register_late", "arguments": {}, "id": "r1"}]}, {"text": "done"}],
    )
    async with run_dsh(tmp_path, model, plugins=["late_command_plugin:plugin_"], python_path=[HERE]) as daemon:
        with anyio.fail_after(WAIT):
            session_id = await daemon.start()
            assert (await daemon.prompt(session_id, "register it")).stop_reason == "end_turn"
            await daemon.client.wait_until(lambda: len(command_updates(daemon, session_id)) == 2)
        first, second = command_updates(daemon, session_id)
        assert "late" not in offered(first[1]) and offered(second[1]) == [*BUILTINS, "late"]
        assert second[1]["availableCommands"][-1] == {
            "name": "late",
            "description": "Registered mid-session",
            "input": {"hint": "<words>"},
        }
        assert await run(daemon, session_id, "/late hello") == ("end_turn", "late says hello")
