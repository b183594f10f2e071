"""Approved commands, ``sandbox: off`` and a machine without a sandbox, over the wire (``dsh acp``, SDK client).

* An approved command runs at ``workspace-write``: it writes in the roots, not outside them and not in ``.git``.
* ``sandbox: {approved: off}``: an approved command runs as before the sandbox (it writes outside the roots).
* With no Landlock (simulated), a command the parser finds read-only asks first, and ``/status`` says why.
* A command stopped by the sandbox asks when run again, and the question says it will run one level wider.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from dsh.sandbox import FORCE_NO_ASK_ENV, support
from dsh.sandbox._support import SIMULATE_ENV
from tests.support.editor import EditorClient, call, run_editor, text_of, write_script

machine = pytest.mark.skipif(not support().available, reason="this machine offers no Landlock")


def config(tmp_path: Path, text: str) -> None:
    path = tmp_path / "home" / ".config" / "dsh" / "config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


async def run(
    tmp_path: Path, commands: list[str], answers: list[str], *, env: dict[str, str] | None = None, prompt: str = "go"
) -> tuple[list[str], list[dict[str, Any]], Any]:
    steps = [call("run_command", f"c{i}", command=command) for i, command in enumerate(commands)]
    model = write_script(tmp_path / "script.json", [*steps, {"text": "done"}])
    client = EditorClient(answers)
    async with run_editor(tmp_path, model, client, env=env) as editor:
        session = (await editor.new_session()).session_id
        await editor.prompt(session, prompt)
        texts = [text_of(editor.final(session, f"c{i}")) for i in range(len(commands))]
        status = None
        if prompt == "go":
            await editor.prompt(session, "/status")
            status = editor.client.text(session)
    return texts, client.permissions(), status


@machine
async def test_an_approved_command_writes_in_the_roots_and_not_outside_nor_in_git(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    await anyio.run_process(["git", "init", "-q", str(project)])
    outside = tmp_path / "outside"
    outside.mkdir()
    command = (
        f"echo inside > made.txt; echo outside > {outside / 'x.txt'}; echo '[core]' >> .git/config; "
        "mkdir -p src && echo nested > src/n.txt; echo finished"
    )
    (text,), asked, _ = await run(tmp_path, [command], ["allow_once"])
    assert len(asked) == 1
    assert (project / "made.txt").read_text(encoding="utf-8") == "inside\n"
    assert (project / "src" / "n.txt").read_text(encoding="utf-8") == "nested\n"
    assert not (outside / "x.txt").exists()
    assert "[core]\n[core]" not in (project / ".git" / "config").read_text(encoding="utf-8")
    assert "finished" in text
    assert "Read-only file system" in text  # .git is a read-only bind
    assert "blocked by the sandbox: approved commands may write only inside the project" in text


async def test_sandbox_off_runs_approved_commands_as_before(tmp_path: Path) -> None:
    config(tmp_path, "sandbox:\n  approved: 'off'\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (text,), asked, _ = await run(tmp_path, [f"echo outside > {outside / 'x.txt'} && echo wrote"], ["allow_once"])
    assert len(asked) == 1
    assert (outside / "x.txt").read_text(encoding="utf-8") == "outside\n"
    assert "blocked" not in text


async def test_without_landlock_a_read_only_command_asks_and_status_says_why(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "a.txt").write_text("inside\n", encoding="utf-8")
    (text,), asked, status = await run(tmp_path, ["cat a.txt"], ["allow_once"], env={SIMULATE_ENV: "unavailable"})
    assert len(asked) == 1
    assert asked[0]["options"][0]["name"] == "Allow (no sandbox here: it runs unconfined)"
    assert "inside" in text
    assert status is not None
    assert f"Sandbox: sandbox unavailable (simulated by {SIMULATE_ENV}=unavailable)" in status


async def test_without_landlock_the_force_hook_does_not_skip_the_question(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    env = {SIMULATE_ENV: "unavailable", FORCE_NO_ASK_ENV: "1"}
    (_text,), asked, _ = await run(tmp_path, ["ls"], ["reject_once"], env=env)
    assert len(asked) == 1


@machine
async def test_a_command_the_sandbox_stopped_asks_when_run_again_and_says_so(tmp_path: Path) -> None:
    command = "echo x > kept.txt"
    texts, asked, _ = await run(tmp_path, [command, command], ["allow_once"], env={FORCE_NO_ASK_ENV: "1"})
    first, second = texts
    assert "blocked by the sandbox" in first
    assert len(asked) == 1  # the first ran without a question (forced); the retry asked
    assert asked[0]["options"][0]["name"] == "Allow with writes in the project"
    assert (tmp_path / "project" / "kept.txt").read_text(encoding="utf-8") == "x\n"
    assert "blocked" not in second


@machine
async def test_the_sandbox_command_switches_where_this_sessions_approved_commands_run(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    command = f"echo outside > {outside / 'x.txt'}"
    model = write_script(tmp_path / "script.json", [call("run_command", "c0", command=command), {"text": "done"}])
    client = EditorClient(["allow_once"])
    async with run_editor(tmp_path, model, client) as editor:
        session = (await editor.new_session()).session_id
        await editor.prompt(session, "/sandbox off")
        shown = editor.client.text(session)
        await editor.prompt(session, "go")
    assert "- off (current)" in shown
    assert "approved commands: off" in shown
    assert (outside / "x.txt").read_text(encoding="utf-8") == "outside\n"


@machine
async def test_without_namespaces_landlock_alone_cuts_tcp_at_read_only(tmp_path: Path) -> None:
    probe = "(exec 3<>/dev/tcp/127.0.0.1/9 && echo connected) 2>&1; echo probed"
    env = {SIMULATE_ENV: "no-namespaces", FORCE_NO_ASK_ENV: "1"}
    (text,), asked, _ = await run(tmp_path, [probe], [], env=env)
    assert asked == []
    assert "probed" in text
    assert "connected" not in text.replace("probed", "")
    assert "Permission denied" in text  # Landlock's TCP rule (a network namespace would say unreachable)


@machine
async def test_without_namespaces_an_approved_command_still_cannot_write_git_or_outside(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    await anyio.run_process(["git", "init", "-q", str(project)])
    before = (project / ".git" / "config").read_text(encoding="utf-8")
    outside = tmp_path / "outside"
    outside.mkdir()
    write = f"echo in > src/a.txt; echo x >> .git/config; echo out > {outside / 'x.txt'}; echo finished"
    (text,), asked, _ = await run(tmp_path, [write], ["allow_once"], env={SIMULATE_ENV: "no-namespaces"})
    assert len(asked) == 1
    assert "finished" in text
    assert (project / "src" / "a.txt").read_text(encoding="utf-8") == "in\n"
    assert (project / ".git" / "config").read_text(encoding="utf-8") == before
    assert not (outside / "x.txt").exists()


@machine
async def test_a_loaded_session_keeps_its_sandbox_choice(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    command = f"echo outside > {outside / 'x.txt'}"
    model = write_script(tmp_path / "script.json", [call("run_command", "c0", command=command), {"text": "done"}])
    async with run_editor(tmp_path, model, EditorClient([])) as editor:
        session = (await editor.new_session()).session_id
        await editor.prompt(session, "/sandbox off")
    async with run_editor(tmp_path, model, EditorClient(["allow_once"])) as editor:
        await editor.load_session(session)
        await editor.prompt(session, "go")
    assert (outside / "x.txt").read_text(encoding="utf-8") == "outside\n"
