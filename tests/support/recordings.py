"""Recorded sessions (``dsh acp --record``, RFC 0020): one scenario driven by the official SDK client, and the
``dsh replay`` command run as a subprocess.

:func:`record_editor_session` is what ``tests/recording`` checks and what ``python -m tests.replays.record``
runs to make the recordings ``tests/replays/`` holds. The scenario: a prompt whose model reads a file (the
editor's buffer, ``fs/read_text_file``), edits it (a permission ask, allowed; ``fs/write_text_file``) and runs a
command (a permission ask, allowed; the editor's terminal), then a prompt whose long reply is cancelled, then
the session is closed and loaded again (its history replayed).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import anyio

from tests.support.editor import DEADLINE, EditorClient, FakeTerminal, call, run_editor, write_script
from tests.support.env import sandbox_env

__all__ = ["SCENARIO_STEPS", "record_editor_session", "run_replay"]

LONG_REPLY = " ".join(f"word{i}" for i in range(400))

SCENARIO_STEPS = [
    call("read_file", "r1", path="notes.txt"),
    call("edit_file", "e1", path="notes.txt", old_string="draft", new_string="final"),
    call("run_command", "c1", command="echo checked"),
    {"text": "Done: notes.txt now says final."},
    {"text": LONG_REPLY, "delay": 0.02},
]


async def record_editor_session(tmp_path: Path, recording: Path, *, env: Mapping[str, str] | None = None) -> str:
    """Run the scenario (module docstring) against ``dsh acp`` with ``DSH_RECORD=recording``; return the
    session id. The project is ``tmp_path/project`` with the editor holding ``notes.txt``."""
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    model = write_script(tmp_path / "scenario.json", SCENARIO_STEPS)
    notes = str(project / "notes.txt")
    client = EditorClient(
        ["allow_once", "allow_once"],
        buffers={notes: "a draft\n"},
        terminal=FakeTerminal(output="checked\n", exit_code=0),
    )
    async with run_editor(
        tmp_path,
        model,
        client,
        project=project,
        fs=True,
        terminal=True,
        env={"DSH_RECORD": str(recording), **(env or {})},
    ) as editor:
        session = (await editor.new_session()).session_id
        answer = await editor.prompt(session, "make the notes final and check")
        assert answer.stop_reason == "end_turn"
        assert client.buffers[notes] == "a final\n"
        async with anyio.create_task_group() as group:
            answers = []

            async def long_prompt() -> None:
                answers.append(await editor.prompt(session, "tell me everything"))

            group.start_soon(long_prompt)
            await editor.wait(lambda: "word3" in client.text(session))
            await editor.conn.cancel(session_id=session)
        assert answers[0].stop_reason == "cancelled"
        with anyio.fail_after(DEADLINE):
            await editor.conn.close_session(session_id=session)
        await editor.load_session(session)
    return session


def run_replay(
    tmp_path: Path,
    recording: Path,
    *args: str,
    src: Path | None = None,
    timeout: float = 60.0,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python -m dsh replay RECORDING ARGS`` in the sandbox environment (*src*: run that copy of ``src/``;
    *env*: more variables)."""
    if "--timeout" not in args and "--update" not in args:
        # The per-frame wait is hang detection here: a copy of src/ without bytecode starts slowly on a busy
        # machine (the product's default, 10 s, is for a person at a terminal). ``--update`` waits for quiet.
        args = (*args, "--timeout", "60")
    python_path = [src] if src is not None else []
    env = {**sandbox_env(tmp_path, "echo", python_path=python_path), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "dsh", "replay", str(recording), *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
