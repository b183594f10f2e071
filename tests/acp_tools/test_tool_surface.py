"""The model's tools over the wire (issue 22's acceptance): a real ``dsh acp`` daemon, the scripted model, the
official SDK client. What the model was given is read from the session log (``tool/result``)."""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp.schema import ReadTextFileResponse

from tests.support.editor import EditorClient, call, read_log, run_editor, tool_results, write_script
from tests.support.env import path_without
from tests.tools.conftest import alive, needs_proc, wait_until_dead


def _text(result: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in result["content"])


def _one(events: list[dict[str, Any]], call_id: str) -> dict[str, Any]:
    (result,) = tool_results(events, call_id)
    return result


async def _bypass(editor: Any) -> str:
    session = (await editor.new_session()).session_id
    await editor.conn.set_session_mode(session_id=session, mode_id="bypass")
    return session


async def test_a_huge_command_output_gives_head_tail_and_a_path_read_file_reaches_the_middle(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    model = f"scripted:{script}"
    async with run_editor(tmp_path, model, EditorClient([])) as editor:
        session = await _bypass(editor)
        spill = tmp_path / "dsh-data" / "tool-output" / session / "big.txt"
        write_script(  # the script is read at the first model call: it can name the session's spill path
            script,
            [
                call("run_command", "big", command="seq 1 200000 | sed 's/^/line /'"),
                call("read_file", "middle", path=str(spill), offset=100000, limit=3),
                {"text": "done"},
            ],
        )
        assert (await editor.prompt(session, "go")).stop_reason == "end_turn"
    events = read_log(tmp_path, session)
    big = _one(events, "big")
    lines = _text(big).split("\n")
    assert lines[:2] == ["line 1", "line 2"]
    assert lines[-2:] == ["line 200000", "[exit code: 0]"]
    assert len(lines) <= 258 and len(_text(big)) <= 30_300
    [marker] = [line for line in lines if line.startswith("[… ")]
    assert str(spill) in marker
    assert big["spill"] == str(spill)
    middle = _one(events, "middle")
    assert not middle["is_error"], _text(middle)
    assert _text(middle).split("\n")[:3] == [
        "100000\tline 100000",
        "100001\tline 100001",
        "100002\tline 100002",
    ]


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    files = {
        "src/app.py": "def main():\n    return find_me()\n",
        "src/util.py": "x = 1\n# find_me here\ny = 2\nz = 3\n",
        "build/out.py": "find_me = 'generated'\n",
        "docs/notes.md": "nothing here\n",
        ".gitignore": "build/\n",
    }
    base = time.time() - 3600
    for index, (name, content) in enumerate(files.items()):
        path = project / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
        os.utime(path, (base + 60 * index, base + 60 * index))  # src/util.py is newer than src/app.py
    return project


@pytest.mark.parametrize("engine", ["ripgrep", "python"])
async def test_grep_and_glob_are_shaped_for_discovery(tmp_path: Path, engine: str) -> None:
    project = _project(tmp_path)
    steps = [
        call("grep", "names", pattern="find_me"),
        call("grep", "limited", pattern="find_me", head_limit=1),
        call("grep", "context", pattern="find_me here", output_mode="content", context=1),
        call("glob", "py", pattern="**/*.py"),
        {"text": "done"},
    ]
    env = None
    if engine == "python":  # no ripgrep on the daemon's PATH: the Python fallback answers
        path = path_without(tmp_path, "rg")
        env = {"PATH": path}
        assert not os.access(f"{path}/rg", os.X_OK) and os.access(f"{path}/sh", os.X_OK)
    model = write_script(tmp_path / "script.json", steps)
    async with run_editor(tmp_path, model, EditorClient([]), project=project, env=env) as editor:
        session = (await editor.new_session()).session_id
        assert (await editor.prompt(session, "look")).stop_reason == "end_turn"
    events = read_log(tmp_path, session)
    assert _text(_one(events, "names")).split("\n") == ["src/util.py", "src/app.py"]  # names, newest first
    limited = _text(_one(events, "limited")).split("\n")
    assert limited[0] == "src/util.py" and limited[1].startswith("[… 1 more files")
    assert _text(_one(events, "context")).split("\n") == [
        "src/util.py-1-x = 1",
        "src/util.py:2:# find_me here",
        "src/util.py-3-y = 2",
    ]
    assert _text(_one(events, "py")).split("\n") == ["src/util.py", "src/app.py"]  # build/ is .gitignored


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@needs_proc
async def test_a_background_server_answers_shows_its_log_and_dies_with_its_session(tmp_path: Path) -> None:
    port = _free_port()
    server = f"{sys.executable} -u -m http.server {port} --bind 127.0.0.1"
    steps = [
        call("run_command", "serve", command=server, background=True),
        call("run_command", "curl", command=f"curl -s -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{port}/"),
        call("command_output", "log", id="bg1"),
        {"text": "done"},
    ]
    model = write_script(tmp_path / "script.json", steps)
    async with run_editor(tmp_path, model, EditorClient([])) as editor:
        session = await _bypass(editor)
        assert (await editor.prompt(session, "serve")).stop_reason == "end_turn"
        serve = editor.final(session, "serve")
        assert serve["status"] == "completed"
        events = read_log_live(tmp_path, session)
        started = _one(events, "serve")
        pid = started["display"]["pid"]
        assert alive(pid)
        assert "Started in the background as bg1" in _text(started)
        assert "Serving HTTP on 127.0.0.1 port" in _text(started)
        assert _text(_one(events, "curl")).startswith("200")
        log = _text(_one(events, "log"))
        assert log.startswith("bg1 is still running.")
        assert '"GET / HTTP/1.1" 200' in log
        with anyio.fail_after(10):
            await editor.conn.close_session(session_id=session)
        await wait_until_dead(pid, pid, within=5)  # closing the session killed it: no process left


def read_log_live(tmp_path: Path, session_id: str) -> list[dict[str, Any]]:
    """The session log while the daemon runs (the turn ended: its events are flushed)."""
    import json

    raw = (tmp_path / "dsh-data" / f"{session_id}.jsonl").read_bytes()
    return [json.loads(line) for line in raw.split(b"\n")[1:] if line.strip()]


class _GatedReads(EditorClient):
    """Serves ``fs/read_text_file`` only once *expected* reads are in flight at the same time: a loop that
    runs them one after another never gets there and its first read times out."""

    def __init__(self, expected: int, buffers: dict[str, str]) -> None:
        super().__init__([], buffers=buffers)
        self.expected = expected
        self.in_flight = 0
        self.most = 0
        self.all_started = anyio.Event()
        self.waited: list[float] = []

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None, **kwargs: Any
    ) -> ReadTextFileResponse:
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        if self.in_flight >= self.expected:
            self.all_started.set()
        started = time.monotonic()
        try:
            with anyio.fail_after(5):
                await self.all_started.wait()
            self.waited.append(time.monotonic() - started)
            return await super().read_text_file(session_id, path, line, limit, **kwargs)
        finally:
            self.in_flight -= 1


async def test_five_read_file_calls_in_one_step_run_concurrently(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    paths = [str(project / f"f{index}.txt") for index in range(5)]  # editor buffers, not on disk
    client = _GatedReads(5, {path: f"content {index}\n" for index, path in enumerate(paths)})
    calls = [{"name": "read_file", "arguments": {"path": path}, "id": f"r{index}"} for index, path in enumerate(paths)]
    model = write_script(tmp_path / "script.json", [{"tool_calls": calls}, {"text": "done"}])
    async with run_editor(tmp_path, model, client, project=project, fs=True) as editor:
        session = (await editor.new_session()).session_id
        assert (await editor.prompt(session, "read them")).stop_reason == "end_turn"
    assert client.most == 5
    events = read_log(tmp_path, session)
    results = [e["data"] for e in events if e["type"] == "tool/result"]
    assert [r["call_id"] for r in results] == [f"r{index}" for index in range(5)]  # recorded in call order
    for index, result in enumerate(results):
        assert not result["is_error"], _text(result)
        assert _text(result) == f"     1\tcontent {index}"
    kinds = [e["type"] for e in events if e["type"] in ("tool/call", "tool/result")]
    assert kinds == ["tool/call"] * 5 + ["tool/result"] * 5


@needs_proc
async def test_background_commands_die_with_the_daemon(tmp_path: Path) -> None:
    steps = [
        call("run_command", "sleeper", command="echo up; sleep 300 & sleep 300", background=True),
        {"text": "started"},
    ]
    model = write_script(tmp_path / "script.json", steps)
    async with run_editor(tmp_path, model, EditorClient([])) as editor:
        session = await _bypass(editor)
        assert (await editor.prompt(session, "start it")).stop_reason == "end_turn"
        pid = _one(read_log_live(tmp_path, session), "sleeper")["display"]["pid"]
        assert alive(pid)
    # run_editor closed stdin and the daemon exited 0: its background commands, and their children, went too
    await wait_until_dead(pid, pid, within=5)
