"""Background results reach the model (issue #38 item 1, RFC 0036), over the wire: a real ``dsh acp`` driven by the
official SDK client, the model a loopback provider whose captured requests show what the model was told.

Each background command waits on a FIFO in the project (``cat gate.fifo``) until the test opens it for writing, so
the test decides when it ends; nothing sleeps."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import anyio
import anyio.to_thread
from acp.schema import ToolCallStart

from tests.beyond_turn.helpers import WAIT, env_for, gated, prompting, text, tool_call, tool_results, user_texts
from tests.support.provider_server import Recorded, Reply, serve
from tests.support.sdk import DshProcess, run_dsh

MARKER = "BG-TAIL-MARKER"
COMMAND = f"cat gate.fifo > /dev/null; echo first-line; echo {MARKER}; exit 3"
FENCE = '<command-output id="bg1" exit_code=3>'
START = {"command": COMMAND, "background": True}


def make_gate(project: Path) -> Path:
    gate = project / "gate.fifo"  # inside the project: the command runs sandboxed (workspace-write)
    os.mkfifo(gate)
    (project / "notes.txt").write_text("hello\n")
    return gate


async def open_gate(gate: Path) -> None:
    """Let the command past its ``cat``: open the FIFO for writing (blocks until the reader is there) and close it."""
    await anyio.to_thread.run_sync(lambda: os.close(os.open(gate, os.O_WRONLY)))


def write_config(tmp_path: Path, text: str) -> None:
    config = tmp_path / "home" / ".config" / "dsh" / "config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(text)


async def bypass(daemon: DshProcess) -> str:
    session_id = await daemon.start()
    await daemon.conn.set_session_mode(session_id=session_id, mode_id="bypass")
    return session_id


async def test_a_command_ending_mid_turn_is_told_once_in_the_next_steps_request(tmp_path: Path) -> None:
    gate = make_gate(tmp_path)

    def respond(recorded: Recorded) -> Reply:
        number = len(server.requests)  # this request included
        if number == 1:
            return tool_call("c1", "run_command", START)
        if MARKER in user_texts(recorded.body) or number > 400:  # hang detection: the turn ends either way
            return text("saw it")
        return tool_call(f"c{number}", "read_file", {"path": "notes.txt"})

    with serve() as server:
        server.respond(respond)
        async with run_dsh(tmp_path, "openai:test-model", env=env_for(server.url)) as daemon:
            with anyio.fail_after(WAIT):
                session_id = await bypass(daemon)
                async with prompting(daemon, session_id, "start the build and keep reading") as answers:
                    await server.wait_requests(2, WAIT)  # run_command returned: the command is waiting at its gate
                    await open_gate(gate)
            assert answers[0].stop_reason == "end_turn"
        bodies = server.bodies()
    assert len(bodies) <= 400, "the ending never reached the model"
    told = [user_texts(body).count(FENCE) for body in bodies]
    first = told.index(1)
    assert first >= 2  # not before the command could end
    assert told == [0] * first + [1] * (len(bodies) - first)  # told once, then kept in the conversation
    assert len(bodies) == first + 1  # the request that told it was of the same turn: the model answered it
    message = user_texts(bodies[first])
    assert '<context source="plugin">' in message
    assert "Background command bg1" in message and "exited with code 3" in message
    assert f"{FENCE}\nfirst-line\n{MARKER}\n</command-output>" in message


async def test_a_command_ending_between_turns_is_in_the_next_prompts_first_request(tmp_path: Path) -> None:
    gate = make_gate(tmp_path)
    with serve() as server:
        server.script(tool_call("c1", "run_command", START), text("started it"), text("next answer"))
        async with run_dsh(tmp_path, "openai:test-model", env=env_for(server.url)) as daemon:
            with anyio.fail_after(WAIT):
                session_id = await bypass(daemon)
                assert (await daemon.prompt(session_id, "start the build")).stop_reason == "end_turn"
                await open_gate(gate)
                while "exited with code 3" not in daemon.client.text(session_id):  # /status: no model call
                    await daemon.prompt(session_id, "/status")
                assert (await daemon.prompt(session_id, "what happened?")).stop_reason == "end_turn"
        bodies = server.bodies()
    assert len(bodies) == 3
    assert [user_texts(body).count(FENCE) for body in bodies] == [0, 0, 1]
    last = user_texts(bodies[2])
    assert last.index("what happened?") < last.index(FENCE)  # the prompt, then the ending, in its first request


async def test_command_wait_returns_at_the_timeout_or_at_the_exit_saying_which(tmp_path: Path) -> None:
    gate = make_gate(tmp_path)
    with serve() as server:
        server.script(
            tool_call("c1", "run_command", START),
            tool_call("w1", "command_wait", {"id": "bg1", "timeout": 0.2}),
            tool_call("w2", "command_wait", {"id": "bg1", "timeout": 60}),
            text("done"),
        )
        async with run_dsh(tmp_path, "openai:test-model", env=env_for(server.url)) as daemon:
            with anyio.fail_after(WAIT):
                session_id = await bypass(daemon)
                async with prompting(daemon, session_id, "wait for the build") as answers:
                    await server.wait_requests(3, WAIT)  # the timed-out wait is over; the long one is asked for
                    await open_gate(gate)
            assert answers[0].stop_reason == "end_turn"
        bodies = server.bodies()
    results = tool_results(bodies[3])
    timed_out, ended = results["w1"], results["w2"]
    assert "bg1 is still running after 0.2 s (the wait timed out)." in timed_out
    assert "bg1 ended: it exited with code 3." in ended
    assert MARKER in ended
    assert FENCE not in user_texts(bodies[3])  # the model saw the ending through command_wait: not told again


async def test_a_cancel_interrupts_command_wait(tmp_path: Path) -> None:
    gate = make_gate(tmp_path)
    with serve() as server:
        server.script(
            tool_call("c1", "run_command", START),
            tool_call("w1", "command_wait", {"id": "bg1", "timeout": 600}),
        )
        async with run_dsh(tmp_path, "openai:test-model", env=env_for(server.url)) as daemon:
            with anyio.fail_after(WAIT):
                session_id = await bypass(daemon)
                async with prompting(daemon, session_id, "wait for the build") as answers:
                    await daemon.client.wait_until(
                        lambda: any(
                            isinstance(u, ToolCallStart) and u.title == "Wait for bg1"
                            for u in daemon.client.of(session_id)
                        )
                    )
                    await daemon.conn.cancel(session_id=session_id)
            assert answers[0].stop_reason == "cancelled"  # the 600 s wait did not hold the turn
            await open_gate(gate)
        assert len(server.requests) == 2


async def test_with_wake_on_an_idle_session_takes_a_turn_of_its_own_announced_by_a_notice(tmp_path: Path) -> None:
    from tests.support.acp_schema import modern_client

    gate = make_gate(tmp_path)
    config_home = tmp_path / "config"
    (config_home / "dsh").mkdir(parents=True)
    (config_home / "dsh" / "config.yaml").write_text("background:\n  wake: true\n")
    with serve() as server:
        server.script(tool_call("c1", "run_command", START), text("started it"), text("woke up"), text("second"))
        environment = {
            "XDG_CONFIG_HOME": str(config_home),
            "OPENAI_BASE_URL": f"{server.url}/v1",
            "OPENAI_API_KEY": "t",
        }
        async with modern_client(tmp_path, "openai:test-model", env=environment) as (client, _):
            with anyio.fail_after(WAIT):
                session = await client.new_session(tmp_path)
                await client.call("session/set_mode", {"sessionId": session, "modeId": "bypass"})
                response = await client.prompt(session, "start the build")
                assert response["result"]["stopReason"] == "end_turn"
                await open_gate(gate)
                notice = await client.wait_for(
                    lambda m: (
                        m.get("method") == "session/update" and m["params"]["update"].get("sessionUpdate") == "notice"
                    ),
                    WAIT,
                )
                await client.wait_for(
                    lambda m: (
                        m.get("method") == "session/update"
                        and m["params"]["update"].get("sessionUpdate") == "agent_message_chunk"
                        and m["params"]["update"]["content"].get("text") == "woke up"
                    ),
                    WAIT,
                )
                second = await client.prompt(session, "and now?")
                assert second["result"]["stopReason"] == "end_turn"
            kinds = [u["sessionUpdate"] for u in client.updates(session)]
        bodies = server.bodies()
    update = notice["params"]["update"]
    assert update["severity"] == "info"
    assert update["title"].startswith("Background command bg1 exited with code 3")
    assert kinds.count("notice") == 1
    assert len(bodies) == 4  # exactly one turn for the wake: the next request is the user's second prompt's
    woke = user_texts(bodies[2])
    assert "A background command you started has ended" in woke and FENCE in woke
    assert "and now?" in user_texts(bodies[3]) and "and now?" not in woke


async def test_with_wake_on_an_ending_during_a_turn_takes_no_turn_of_its_own(tmp_path: Path) -> None:
    gate = make_gate(tmp_path)
    write_config(tmp_path, "background:\n  wake: true\n")
    release = threading.Event()
    with serve() as server:
        server.script(
            tool_call("c1", "run_command", START),
            gated(tool_call("c2", "command_wait", {"id": "bg1", "timeout": 60}), release),
            text("done"),
            text("second"),
        )
        async with run_dsh(tmp_path, "openai:test-model", env=env_for(server.url)) as daemon:
            with anyio.fail_after(WAIT):
                session_id = await bypass(daemon)
                async with prompting(daemon, session_id, "build") as answers:
                    await server.wait_requests(2, WAIT)
                    await open_gate(gate)
                    release.set()
                assert (await daemon.prompt(session_id, "and now?")).stop_reason == "end_turn"
            assert answers[0].stop_reason == "end_turn"
        bodies = server.bodies()
    assert len(bodies) == 4  # no wake-up turn: the ending came while the agent was running
    assert "and now?" in user_texts(bodies[3])


async def test_exec_wait_background_waits_and_tells_the_model_in_a_turn_of_its_own(tmp_path: Path) -> None:
    from tests.support.headless import spawn_exec

    project = tmp_path / "project"
    project.mkdir()
    gate = make_gate(project)
    with serve() as server:
        server.script(tool_call("c1", "run_command", START), text("started it"), text("the build failed with 3"))
        args = ("--json", "--wait-background", "--allow-all", "start the build and report")
        async with spawn_exec(tmp_path, *args, model="openai:test-model", env=env_for(server.url)) as running:
            with anyio.fail_after(WAIT):
                await running.wait_for("agent/turn-end")  # the task's turn is over; the command still runs
                await open_gate(gate)
                result = await running.wait_for("result")
                while await running.next_line() is not None:
                    pass
                assert await running.process.wait() == 0
        bodies = server.bodies()
    assert result["text"] == "the build failed with 3"  # the run's answer is the last turn's
    assert len(bodies) == 3
    assert [user_texts(body).count(FENCE) for body in bodies] == [0, 0, 1]


async def test_exec_without_wait_background_does_not_wait(tmp_path: Path) -> None:
    from tests.support.headless import spawn_exec

    project = tmp_path / "project"
    project.mkdir()
    make_gate(project)  # never opened: the command would wait forever
    with serve() as server:
        server.script(tool_call("c1", "run_command", START), text("started it"))
        args = ("--json", "--allow-all", "start the build")
        async with spawn_exec(tmp_path, *args, model="openai:test-model", env=env_for(server.url)) as running:
            with anyio.fail_after(WAIT):
                result = await running.wait_for("result")
                assert await running.process.wait() == 0
        assert result["text"] == "started it"
        assert len(server.requests) == 2
