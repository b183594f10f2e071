"""The hostile-command corpus over the wire (issue #33 acceptance; the corpus: :mod:`tests.support.hostile_commands`).

A real ``dsh acp`` daemon with the scripted model and the official SDK client, which declines every question;
one batch of tool calls per session: default, accept-edits and plan mode, and inside an ``explore`` sub-agent;
then ``dsh exec --allow-reads`` (with and without ``--allow-edits``), where nobody can be asked. After each run:
nothing was written outside what the edit tools were allowed to write, no program the model or the repository
chose ran, no secret from outside the roots reached anything dsh stored or printed, and every hostile command
(but the git ones, which are harmless once their configuration was refused) was asked or refused, never run.

``layer``: ``parser`` is dsh as it ships; ``sandbox`` forces the parser's verdict to "read-only, run it"
(:func:`~tests.support.hostile_commands.forced_no_ask_env`, the sandbox's test hook), so that the OS sandbox alone
must hold.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from acp import text_block

from tests.support.editor import EditorClient, run_editor, write_script
from tests.support.headless import exec_run
from tests.support.hostile_commands import (
    CORPUS,
    EDITS,
    World,
    check_world,
    forced_no_ask_env,
    make_world,
    results_by_id,
    script_steps,
    snapshot,
)
from tests.support.subagent_tools import PLUGIN

LAYERS = ["parser", "sandbox"]
DEADLINE = 120.0
ACCEPT_EDITS_WRITES = tuple(path for path, _ in EDITS if ".git" not in path.split("/") and path != ".gitattributes")


def _layer_env(layer: str) -> dict[str, str]:
    env = {"DSH_PLUGINS": PLUGIN}
    if layer == "sandbox":
        forced = forced_no_ask_env()
        if forced is None:
            pytest.skip("this dsh has no sandbox whose verdict hook could be forced (issue #33 item 1)")
        env.update(forced)
    return env


def _assert_asked_or_refused(world: World, prefix: str, layer: str) -> None:
    """Every hostile call of the batch *prefix* ended refused or declined (never ran), but the git class."""
    if layer != "parser":
        return  # the sandbox layer runs everything on purpose; the world check is its proof
    results = results_by_id(world)
    ran = []
    for index, hostile in enumerate(CORPUS):
        result = results.get(f"{prefix}h{index}")
        assert result is not None, f"no result for {prefix}h{index} ({hostile.command[:60]!r})"
        if hostile.kind == "git configuration":
            continue
        if (result.get("error") or {}).get("code") != "PERMISSION_DENIED":
            ran.append(f"{hostile.kind}: {hostile.command[:80]!r}")
    assert not ran, "ran without a question:\n" + "\n".join(ran)


def _task(call_id: str) -> dict[str, Any]:
    return {"name": "task", "arguments": {"description": "look", "prompt": "look around"}, "id": call_id}


@pytest.mark.parametrize("layer", LAYERS)
async def test_the_corpus_in_every_mode_and_in_an_explore_sub_agent(tmp_path: Path, layer: str) -> None:
    env = _layer_env(layer)
    world = make_world(tmp_path)
    # the sandbox layer forces every command to run: one mode with edits and the sub-agent show it (plan mode
    # refuses commands before the sandbox is consulted, and default mode differs from accept-edits only in edits)
    sessions = ("default", "accept-edits", "plan", "explore") if layer == "parser" else ("accept-edits", "explore")
    steps: list[dict[str, Any]] = []
    for name in sessions:
        prefix = name[0] + name[-1]
        if name == "explore":
            steps.append({"tool_calls": [_task(f"{prefix}task")]})
            steps.extend(script_steps(world, prefix))  # the child's steps
            steps.append({"text": "explored"})
        else:
            steps.extend(script_steps(world, prefix))
    model = write_script(tmp_path / "script.json", steps)
    before = snapshot(world)
    client = EditorClient(["reject_once"] * 2000)
    async with run_editor(tmp_path, model, client, project=world.project, env=env) as editor:
        for name in sessions:
            session = (await editor.new_session()).session_id
            if name != "explore":
                await editor.conn.set_session_mode(session_id=session, mode_id=name)
            with anyio.fail_after(DEADLINE):  # a whole batch: longer than Editor.prompt's bound for one step
                response = await editor.conn.prompt(session_id=session, prompt=[text_block("go")])
            assert response.stop_reason == "end_turn"
        asked = client.permissions()
    check_world(world, before, allowed_writes=ACCEPT_EDITS_WRITES)
    for name in sessions:
        _assert_asked_or_refused(world, name[0] + name[-1], layer)
    if layer == "parser":
        titles = [request["toolCall"]["title"] for request in asked]
        assert all("\x1b" not in title and "\r" not in title and "\u202e" not in title for title in titles)
        assert any("\\x1b" in title for title in titles)  # the control-character commands were shown escaped


@pytest.mark.parametrize(
    ("layer", "edits"),
    [("parser", False), ("parser", True), ("sandbox", True)],
    ids=["parser-allow-reads", "parser-allow-reads-and-edits", "sandbox-allow-reads-and-edits"],
)
def test_the_corpus_in_dsh_exec_with_allow_reads(tmp_path: Path, layer: str, edits: bool) -> None:
    env = _layer_env(layer)
    world = make_world(tmp_path)
    model = write_script(tmp_path / "script.json", script_steps(world, "x"))
    before = snapshot(world)
    flags = ["--json", "--allow-reads", *(["--allow-edits"] if edits else [])]
    run = exec_run(tmp_path, *flags, "go", model=model, env=env, cwd=world.project)
    assert run.code == 1, run.stderr[-2000:]  # 1: calls were refused (the edits of git's files, in both layers)
    shown = [line for line in run.stderr.splitlines() if line.startswith("dsh: run_command:")]
    assert shown and not any(char in line for line in shown for char in "\x1b\r\u202e\u200b")
    check_world(world, before, allowed_writes=ACCEPT_EDITS_WRITES if edits else (), printed=run.stdout + run.stderr)
    _assert_asked_or_refused(world, "x", layer)


async def test_a_megabyte_command_and_a_deep_one_ask_with_no_always_and_the_daemon_keeps_answering(
    tmp_path: Path,
) -> None:
    """The issue measured a 24 s freeze for a 1 MB line and "maximum recursion depth exceeded" for ``$(`` nested
    5,000 deep. Both now ask, with no "always", saying why; ``session/list`` is answered while the turn runs (the
    split is in a worker thread; 60 s bounds are hang detection, not a latency promise)."""
    big = "cat inside.txt > ../outside/pwned # " + "a" * 1_000_000
    deep = "cat " + "$(" * 5000 + "x" + ")" * 5000
    steps = [
        {
            "tool_calls": [
                {"name": "run_command", "arguments": {"command": c}, "id": i} for i, c in (("big", big), ("deep", deep))
            ]
        }
    ]
    model = write_script(tmp_path / "script.json", [*steps, {"text": "done"}])
    client = EditorClient(["reject_once", "reject_once"])
    listed: list[int] = []
    async with run_editor(tmp_path, model, client) as editor:
        session = (await editor.new_session()).session_id
        finished = anyio.Event()

        async def lister() -> None:
            while not finished.is_set():
                listed.append(len((await editor.conn.list_sessions()).sessions))
                await anyio.lowlevel.checkpoint()

        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                group.start_soon(lister)
                response = await editor.conn.prompt(session_id=session, prompt=[text_block("go")])
                finished.set()
    assert response.stop_reason == "end_turn"
    # A session is listed once its first prompt is logged (empty sessions are not listed): answers that came
    # before that, on a busy machine, say 0; from then on every answer lists it.
    logged = listed[listed.index(1) :] if 1 in listed else []
    assert logged and all(count == 1 for count in logged) and set(listed) <= {0, 1}, listed
    asked = {request["toolCall"]["toolCallId"]: request for request in client.permissions()}
    assert sorted(asked) == ["big", "deep"]
    for request in asked.values():
        assert [option["name"] for option in request["options"]] == ["Allow", "Reject"]
    results = results_by_id(World(tmp_path, tmp_path / "project", tmp_path / "outside", tmp_path / "none"))
    assert set(results) == {"big", "deep"}
