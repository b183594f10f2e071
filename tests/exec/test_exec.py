"""``dsh exec`` (RFC 0020): JSON lines of the agent stream and a result, exit codes, Ctrl+C, sessions, MCP."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from dsh.agent_stream import SCHEMA
from tests.support.env import ROOT, write_script
from tests.support.headless import exec_run, spawn_exec
from tests.support.timing import promised

pytestmark = pytest.mark.anyio

AGENT_TYPES = set(SCHEMA) | {"agent/tool-call", "agent/tool-result"}


def _session_file(tmp_path: Path, session_id: str) -> list[dict[str, object]]:
    raw = (tmp_path / "dsh-data" / f"{session_id}.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in raw.splitlines()]


def test_json_events_are_the_agent_streams_and_the_result_ends_them(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("a draft\n", encoding="utf-8")
    model = write_script(
        tmp_path / "script.json",
        [
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}, "id": "r1"}]},
            {
                "tool_calls": [
                    {
                        "name": "edit_file",
                        "arguments": {"path": "notes.txt", "old_string": "draft", "new_string": "final"},
                        "id": "e1",
                    }
                ]
            },
            {"tool_calls": [{"name": "run_command", "arguments": {"command": "echo checked"}, "id": "c1"}]},
            {"text": "Done: notes are final.", "usage": {"input_tokens": 100, "output_tokens": 7}},
        ],
    )
    run = exec_run(tmp_path, "--json", "--allow-all", "make the notes final", model=model)
    assert run.code == 0, run.stderr
    lines = run.lines  # every line parses
    *events, result = lines
    assert {line["type"] for line in events} <= AGENT_TYPES, {line["type"] for line in events} - AGENT_TYPES
    for event in events:
        assert set(SCHEMA.get(event["type"], {})) - {"error?"} <= set(event), event
    names = [e["name"] for e in events if e["type"] == "agent/tool-call"]
    assert names == ["read_file", "edit_file", "run_command"]
    results = {e["callId"]: e for e in events if e["type"] == "agent/tool-result"}
    assert not any(r["isError"] for r in results.values()), results
    assert "checked" in json.dumps(results["c1"]["content"])
    assert [e["reason"]["kind"] for e in events if e["type"] == "agent/turn-end"] == ["completed"]
    assert result["type"] == "result" and result["stopReason"] == "end_turn"
    assert result["text"] == "Done: notes are final."
    assert result["usage"]["output_tokens"] >= 7 and result["usage"]["input_tokens"] > 100
    assert result["filesChanged"] == [str(project / "notes.txt")]
    assert result["denied"] == [] and result["steps"] == 4
    assert (project / "notes.txt").read_text(encoding="utf-8") == "a final\n"
    assert _session_file(tmp_path, result["sessionId"])[0]["type"] == "session"  # stored, like an editor's


def test_without_json_the_answer_alone_is_on_stdout_and_progress_on_stderr(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "script.json",
        [{"tool_calls": [{"name": "list_files", "arguments": {"path": "."}, "id": "l1"}]}, {"text": "Two files."}],
    )
    run = exec_run(tmp_path, "what is here?", model=model)
    assert run.code == 0, run.stderr
    assert run.stdout == "Two files.\n"
    assert "dsh: list_files: ." in run.stderr  # not a terminal: one plain line per tool call


def test_the_task_can_come_from_stdin_and_usage_errors_exit_2(tmp_path: Path) -> None:
    run = exec_run(tmp_path, "-", stdin="echo this back")
    assert (run.code, run.stdout) == (0, "echo this back\n"), run.stderr
    unknown = exec_run(tmp_path, "hi", "--model", "nosuch:model")
    assert unknown.code == 2 and unknown.stderr.startswith("dsh: --model: no provider serves model 'nosuch:model'")


def test_contradictory_or_bad_options_are_usage_errors(capfd: pytest.CaptureFixture[str]) -> None:
    """Refused before anything starts (in this process: nothing is built, nothing is logged)."""
    from dsh.cli import main

    assert main(["exec", "hi", "--session", "x", "--ephemeral"]) == 2
    assert "--ephemeral" in capfd.readouterr().err
    assert main(["exec", "hi", "--max-steps", "0"]) == 2
    out, err = capfd.readouterr()
    assert out == "" and "--max-steps" in err
    assert main(["prompt", "hi", "--timeout", "-1"]) == 2
    assert "--timeout" in capfd.readouterr().err


def test_limits_and_failures_exit_1_and_say_why(tmp_path: Path) -> None:
    calls = [{"tool_calls": [{"name": "list_files", "arguments": {"path": "."}, "id": f"l{i}"}]} for i in range(3)]
    limited = exec_run(tmp_path, "--json", "--max-steps", "2", "go", model=write_script(tmp_path / "a.json", calls))
    assert limited.code == 1
    assert limited.lines[-1]["stopReason"] == "max_turn_requests" and limited.lines[-1]["steps"] == 2
    assert "--max-steps" in limited.stderr
    failing = write_script(tmp_path / "b.json", [{"error": {"message": "rate limited", "code": "RATE_LIMIT"}}])
    failed = exec_run(tmp_path, "--json", "go", model=failing)
    assert failed.code == 1
    assert failed.lines[-1]["stopReason"] == "error"
    assert failed.lines[-1]["error"] == {"message": "rate limited", "code": "RATE_LIMIT"}
    assert "rate limited" in failed.stderr
    slow = write_script(tmp_path / "c.json", [{"hang": True}])
    started = time.monotonic()
    timed = exec_run(tmp_path, "--json", "--timeout", "0.5", "go", model=slow)
    assert timed.code == 1 and timed.lines[-1]["stopReason"] == "timeout", timed.stderr
    assert time.monotonic() - started < 15


def test_ephemeral_stores_nothing(tmp_path: Path) -> None:
    run = exec_run(tmp_path, "--json", "--ephemeral", "hello")
    assert run.code == 0, run.stderr
    data = tmp_path / "dsh-data"
    assert not data.exists() or not any(data.glob("*.jsonl"))


async def test_ctrl_c_exits_130_within_a_second_and_the_session_continues(tmp_path: Path) -> None:
    long_reply = {"text": " ".join(f"w{i}" for i in range(2000)), "delay": 0.02}
    model = write_script(tmp_path / "long.json", [long_reply])
    with anyio.fail_after(30):
        async with spawn_exec(tmp_path, "--json", "tell me a long story", model=model) as running:
            await running.wait_for("agent/stream-chunk")
            sent = time.monotonic()
            running.process.send_signal(signal.SIGINT)
            await running.process.wait()
            took = time.monotonic() - sent
            while await running.next_line() is not None:
                pass
    assert running.process.returncode == 130
    assert took < promised(1.0), f"exit {took:.2f} s after SIGINT"  # the reply alone lasts 40 s
    result = running.lines[-1]
    assert result["type"] == "result" and result["stopReason"] == "cancelled"
    assert [e["reason"]["kind"] for e in running.lines if e["type"] == "agent/turn-end"] == ["aborted"]
    session = result["sessionId"]
    stored = _session_file(tmp_path, session)
    assert stored[-1]["type"] == "turn/end", stored[-1]  # the cancelled turn was closed and saved
    again = exec_run(tmp_path, "--json", "--session", session, "and now?", model="echo")
    assert again.code == 0, again.stderr
    assert again.lines[-1]["sessionId"] == session and again.lines[-1]["text"] == "and now?"
    turns = [e for e in _session_file(tmp_path, session) if e["type"] == "turn/end"]
    assert len(turns) == 2


def test_continuing_an_unknown_session_fails_clearly(tmp_path: Path) -> None:
    run = exec_run(tmp_path, "--session", "0d3c1d9e-1111-4222-8333-944455556666", "hi")
    assert run.code == 1 and "0d3c1d9e-1111-4222-8333-944455556666" in run.stderr and run.stdout == ""


def test_mcp_servers_of_the_config_file_work(tmp_path: Path) -> None:
    served = tmp_path / "served"
    served.mkdir()
    config = tmp_path / "config.yaml"
    server = {
        "command": sys.executable,
        "args": ["-m", "tests.support.mcp_servers", "stdio", str(served)],
        "env": {"PYTHONPATH": str(ROOT)},
    }
    config.write_text(json.dumps({"mcp_servers": {"main": server}}), encoding="utf-8")
    model = write_script(
        tmp_path / "script.json",
        [{"tool_calls": [{"name": "mcp__main__lookup", "arguments": {"key": "k"}, "id": "m1"}]}, {"text": "ok"}],
    )
    run = exec_run(tmp_path, "--json", "look k up", model=model, env={"DSH_CONFIG": str(config)})
    assert run.code == 0, run.stderr
    results = [e for e in run.lines if e["type"] == "agent/tool-result"]
    assert results and not results[0]["isError"], results
    assert "value of k" in json.dumps(results[0]["content"])
    pid = int((served / "pid-1").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the run's server ended with it


def test_on_a_terminal_progress_is_a_spinner_redrawn_in_place(tmp_path: Path) -> None:
    import pty
    import subprocess

    from tests.support.env import sandbox_env

    model = write_script(
        tmp_path / "script.json",
        [
            {"tool_calls": [{"name": "list_files", "arguments": {"path": "."}, "id": "l1"}]},
            {"text": "Listed the files here.", "delay": 0.2},
        ],
    )
    project = tmp_path / "project"
    project.mkdir()
    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "dsh", "exec", "list"],
            env=sandbox_env(tmp_path, model),
            cwd=project,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=follower,
            timeout=30,
            check=False,
        )
        os.close(follower)
        follower = -1
        seen = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if follower >= 0:
            os.close(follower)
        os.close(leader)
    assert done.returncode == 0
    assert done.stdout == b"Listed the files here.\n"  # the answer alone, however the progress was shown
    shown = seen.decode("utf-8", errors="replace")
    assert shown.count("thinking") >= 3, shown  # redrawn in place while the model streams…
    assert shown.endswith("\r\x1b[2K"), shown  # …and cleared at the end
    assert "dsh: list_files" not in shown  # no plain log lines on a terminal


def test_a_real_provider_runs_and_the_result_has_its_usage_and_cost(tmp_path: Path) -> None:
    from tests.support.provider_server import Reply, serve
    from tests.support.provider_wire import oa_text_reply

    with serve() as server:
        server.script(Reply(events=oa_text_reply("Hello ", "from the provider.", prompt=1000, completion=500)))
        env = {"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "sk-test-exec-0123456789"}
        run = exec_run(tmp_path, "--json", "hi", model="openai:gpt-4.1", env=env)
    assert run.code == 0, run.stderr
    result = run.lines[-1]
    assert result["text"] == "Hello from the provider."
    assert result["usage"] == {"input_tokens": 1000, "output_tokens": 500}
    assert result["cost"] == pytest.approx((1000 * 2.0 + 500 * 8.0) / 1_000_000)  # gpt-4.1's built-in price
    assert "sk-test-exec" not in run.stdout + run.stderr
    missing = exec_run(tmp_path, "hi", model="openai:gpt-4.1", env={"OPENAI_API_KEY": None})
    assert missing.code == 2 and "OPENAI_API_KEY" in missing.stderr and missing.stdout == ""


def test_a_command_is_refused_without_a_flag_and_runs_with_one(tmp_path: Path) -> None:
    """Nobody can approve in a headless run: what would ask is refused (exit 1, the reason on stderr and in the
    result), and the model is told how it could be allowed; ``--allow-all`` lets it run."""
    project = tmp_path / "project"
    project.mkdir()
    steps = [
        {"tool_calls": [{"name": "run_command", "arguments": {"command": "touch made.txt"}, "id": "c1"}]},
        {"text": "I tried."},
    ]
    refused = exec_run(tmp_path, "--json", "make the file", model=write_script(tmp_path / "a.json", steps))
    assert refused.code == 1, refused.stderr
    assert not (project / "made.txt").exists()
    result = refused.lines[-1]
    assert result["stopReason"] == "end_turn" and [d["tool"] for d in result["denied"]] == ["run_command"]
    told = next(e for e in refused.lines if e["type"] == "agent/tool-result")
    assert told["isError"] and told["error"]["code"] == "PERMISSION_DENIED"
    assert "--allow-all" in json.dumps(told["content"])  # the model can say what to allow
    assert "refused run_command" in refused.stderr and "--allow-all" in refused.stderr

    allowed = exec_run(
        tmp_path, "--json", "--allow-all", "make the file", model=write_script(tmp_path / "b.json", steps)
    )
    assert allowed.code == 0, allowed.stderr
    assert (project / "made.txt").exists() and allowed.lines[-1]["denied"] == []


def test_edits_need_allow_edits_and_plan_mode_stays_read_only(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    steps = [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "new.txt", "content": "x\n"}, "id": "w1"}]},
        {"text": "ok"},
    ]
    plain = exec_run(tmp_path, "write", model=write_script(tmp_path / "a.json", steps))
    assert plain.code == 1 and not (project / "new.txt").exists()
    assert plain.stdout == "ok\n" and "refused write_file" in plain.stderr
    planned = exec_run(
        tmp_path, "--mode", "plan", "--allow-all", "write", model=write_script(tmp_path / "b.json", steps)
    )
    assert planned.code == 1 and not (project / "new.txt").exists()
    edits = exec_run(tmp_path, "--json", "--allow-edits", "write", model=write_script(tmp_path / "c.json", steps))
    assert edits.code == 0, edits.stderr
    assert edits.lines[-1]["filesChanged"] == [str(project / "new.txt")]
    bad = exec_run(tmp_path, "--mode", "yolo", "write")
    assert bad.code == 2 and "yolo" in bad.stderr and bad.stdout == ""


def test_a_reader_that_stops_reading_does_not_break_the_run(tmp_path: Path) -> None:
    """``dsh exec --json … | head -1``: the run still ends normally, with no traceback."""
    import subprocess

    from tests.support.env import sandbox_env

    project = tmp_path / "project"
    project.mkdir()
    process = subprocess.Popen(
        [sys.executable, "-m", "dsh", "exec", "--json", " ".join(f"w{i}" for i in range(3000))],
        env=sandbox_env(tmp_path, "echo"),
        cwd=project,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    with process:
        assert process.stdout is not None and process.stderr is not None
        first = process.stdout.readline()
        assert json.loads(first)["type"] == "agent/created"
        process.stdout.close()
        err = process.stderr.read().decode()
        assert process.wait(timeout=30) == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err


def test_a_command_cannot_read_the_key_from_the_runs_environ(tmp_path: Path) -> None:
    """``dsh exec`` is the parent of the commands the model runs: its start-up environment block holds no key."""
    import base64

    key = "sk-exec-environ-0123456789abcdef"
    model = write_script(
        tmp_path / "script.json",
        [
            {
                "tool_calls": [
                    {"name": "run_command", "arguments": {"command": "base64 -w0 /proc/$PPID/environ"}, "id": "b"}
                ]
            },
            {"text": "read"},
        ],
    )
    run = exec_run(tmp_path, "--json", "--allow-all", "look", model=model, env={"OPENAI_API_KEY": key})
    assert run.code == 0, run.stderr
    result = next(e for e in run.lines if e["type"] == "agent/tool-result")
    text = result["content"][0]["text"]
    if "Permission denied" not in text:  # as root the block is readable: then the key must be gone from it
        environ = base64.b64decode(text.strip().splitlines()[0])
        assert b"DSH_MODEL=" in environ and b"OPENAI_API_KEY=" in environ  # the run's block, read whole
        assert key.encode() not in environ
    assert key not in run.stdout


async def _interrupt_after(tmp_path: Path, delay: float | None) -> tuple[int, list[dict[str, Any]], str]:
    """Start ``dsh exec --json`` on a long reply; SIGINT after *delay* seconds (None: once it streams)."""
    long_reply = {"text": " ".join(f"w{i}" for i in range(3000)), "delay": 0.02}
    model = write_script(tmp_path / "long.json", [long_reply])
    with anyio.fail_after(60):
        async with spawn_exec(tmp_path, "--json", "tell me a long story", model=model) as running:
            if delay is None:
                await running.wait_for("agent/stream-chunk")
            else:
                await anyio.sleep(delay)
            running.process.send_signal(signal.SIGINT)
            while await running.next_line() is not None:
                pass
            code = await running.process.wait()
    return code, running.lines, (tmp_path / "exec.stderr.log").read_text(errors="replace")


@pytest.mark.parametrize("delay", [0.15, 0.4, 0.8, 1.5, None])
async def test_sigint_at_any_moment_ends_with_one_result_line_and_130(tmp_path: Path, delay: float | None) -> None:
    """Issue 42 item 5: from start-up (imports, parsing, the application starting) to the streaming turn, a Ctrl+C
    ends the run with exit 130 and exactly one result line, never a traceback."""
    code, lines, stderr = await _interrupt_after(tmp_path, delay)
    assert code == 130, stderr[-2000:]
    assert "Traceback" not in stderr and "Aborted" not in stderr, stderr[-2000:]
    results = [line for line in lines if line["type"] == "result"]
    assert len(results) == 1 and lines[-1] is results[0], lines[-3:]
    assert results[0]["stopReason"] == "cancelled"
