"""The ``task`` tool over the wire (issue 24): a real ``dsh acp`` daemon, the scripted model (the children's steps
come from the same script, in the order the model is called), the official SDK client."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio

from tests.support.editor import EditorClient, call, read_log, run_editor, text_of, tool_results, write_script
from tests.support.env import sandbox_env
from tests.support.subagent_tools import PLUGIN

ENV = {"DSH_PLUGINS": PLUGIN}


def _task(call_id: str, prompt: str, agent: str | None = None) -> dict[str, Any]:
    arguments: dict[str, Any] = {"description": f"job {call_id}", "prompt": prompt}
    if agent is not None:
        arguments["agent"] = agent
    return {"name": "task", "arguments": arguments, "id": call_id}


def _text(result: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in result["content"])


def _children(tmp_path: Path) -> dict[str, dict[str, Any]]:
    """Header of every stored child session, by the parent call that started it."""
    import json

    found = {}
    for path in (tmp_path / "dsh-data").glob("task-*.jsonl"):
        header = json.loads(path.read_bytes().split(b"\n", 1)[0])
        found[header["parent_call"]] = header
    return found


async def test_three_tasks_run_concurrently_report_progress_and_return_in_call_order(tmp_path: Path) -> None:
    steps: list[dict[str, Any]] = [
        {"tool_calls": [_task(c, "work", agent="general") for c in ("t1", "t2", "t3")]},
        # each child's first model call: the barrier, which only returns once all three children are inside it
        call("barrier", "b1", parties=3),
        call("barrier", "b2", parties=3),
        call("barrier", "b3", parties=3),
        {"text": "report alpha"},
        {"text": "report beta"},
        {"text": "report gamma"},
        {"text": "all done"},
    ]
    model = write_script(tmp_path / "script.json", steps)
    async with run_editor(tmp_path, model, EditorClient([]), env=ENV) as editor:
        session = (await editor.new_session()).session_id
        await editor.conn.set_session_mode(session_id=session, mode_id="bypass")
        assert (await editor.prompt(session, "go")).stop_reason == "end_turn"
        listed = await editor.conn.list_sessions()
        assert [info.session_id for info in listed.sessions] == [session]  # the children are hidden
        for call_id in ("t1", "t2", "t3"):
            updates = editor.tool_updates(session, call_id)
            final = editor.final(session, call_id)
            assert final["status"] == "completed", final
            progress = [u for u in updates if u.get("status") == "in_progress" and u.get("content")]
            assert progress, updates
            assert "barrier" in text_of(progress[0])
            assert updates.index(progress[0]) < updates.index(final)
            assert progress[0]["_meta"]["dsh"]["parentToolCallId"] == call_id
            # the child's own tool call, as a card of its own tagged with the parent call
            own = [
                u
                for u in editor.updates(session)
                if u.get("sessionUpdate") in ("tool_call", "tool_call_update")
                and u.get("_meta", {}).get("dsh", {}).get("parentToolCallId") == call_id
                and u["toolCallId"].startswith("task-")
            ]
            assert own[0]["sessionUpdate"] == "tool_call" and own[0]["title"] == "barrier", own
            assert own[-1]["status"] == "completed" and text_of(own[-1]) == "met 3", own
            assert {u["toolCallId"] for u in own} == {own[0]["toolCallId"]}
    events = read_log(tmp_path, session)
    results = [e["data"] for e in events if e["type"] == "tool/result"]
    assert [r["call_id"] for r in results] == ["t1", "t2", "t3"]  # call order
    children = _children(tmp_path)
    assert sorted(children) == ["t1", "t2", "t3"]
    reports = set()
    for result in results:
        header = children[result["call_id"]]
        assert header["parent_session"] == session
        child = read_log(tmp_path, header["id"])
        (barrier,) = [e["data"] for e in child if e["type"] == "tool/result"]
        assert _text(barrier) == "met 3", _text(barrier)  # all three children were inside at once
        answer = [e["data"] for e in child if e["type"] == "assistant/message"][-1]
        assert _text(result) == _text(answer) and not result["is_error"]
        reports.add(_text(result))
        assert child[-1]["type"] == "turn/end" and child[-1]["data"]["reason"]["kind"] == "completed"
    assert reports == {"report alpha", "report beta", "report gamma"}


async def test_an_explore_child_cannot_write_or_rm_and_nobody_is_asked(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "keep.txt").write_text("keep\n")
    steps: list[dict[str, Any]] = [
        {"tool_calls": [_task("t1", "look around")]},
        {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "new.txt", "content": "x"}, "id": "w"},
                {"name": "run_command", "arguments": {"command": "rm keep.txt"}, "id": "rm"},
                {"name": "run_command", "arguments": {"command": "cat keep.txt"}, "id": "cat"},
            ]
        },
        {"text": "I could only read."},
        {"text": "done"},
    ]
    model = write_script(tmp_path / "script.json", steps)
    async with run_editor(tmp_path, model, EditorClient([]), project=project, env=ENV) as editor:
        session = (await editor.new_session()).session_id  # default mode: a write would ask
        assert (await editor.prompt(session, "go")).stop_reason == "end_turn"
        assert editor.client.permissions() == []
        before = editor.client.text(session)
        assert (await editor.prompt(session, "/agents")).stop_reason == "end_turn"
        listing = editor.client.text(session)[len(before) :]
        assert "- explore: job t1 — completed, 3 tool calls (task-" in listing, listing
    assert not (project / "new.txt").exists()
    assert (project / "keep.txt").read_text() == "keep\n"
    (header,) = _children(tmp_path).values()
    child = read_log(tmp_path, header["id"])
    for call_id in ("w", "rm"):
        (result,) = tool_results(child, call_id)
        assert result["is_error"] and result["error"]["code"] == "PERMISSION_DENIED", result
    (cat,) = tool_results(child, "cat")
    assert not cat["is_error"] and "keep" in _text(cat)
    (parent_result,) = tool_results(read_log(tmp_path, session), "t1")
    assert _text(parent_result) == "I could only read."


async def test_cancel_during_a_child_answers_cancelled_and_leaves_no_child_running(tmp_path: Path) -> None:
    steps: list[dict[str, Any]] = [
        {"tool_calls": [_task("t1", "work", agent="general")]},
        call("block", "k"),
    ]
    model = write_script(tmp_path / "script.json", steps)
    async with run_editor(tmp_path, model, EditorClient([]), env=ENV) as editor:
        session = (await editor.new_session()).session_id
        await editor.conn.set_session_mode(session_id=session, mode_id="bypass")
        async with anyio.create_task_group() as group:
            answer: list[Any] = []

            async def prompt() -> None:
                answer.append(await editor.prompt(session, "go"))

            group.start_soon(prompt)
            await editor.wait(
                lambda: any(
                    u.get("status") == "in_progress" and u.get("content") for u in editor.tool_updates(session, "t1")
                )
            )
            with anyio.fail_after(2):
                await editor.conn.cancel(session_id=session)
        assert answer[0].stop_reason == "cancelled"
        assert editor.final(session, "t1")["status"] == "failed"
        # read while the daemon still runs: the child's turn ended with the cancel, not with the daemon's exit
        (header,) = _children(tmp_path).values()
        child = read_log(tmp_path, header["id"])
        assert child[-1]["type"] == "turn/end", child[-1]
        assert child[-1]["data"]["reason"]["kind"] == "aborted", child[-1]
        (blocked,) = tool_results(child, "k")
        assert _text(blocked) == "cancelled: cancelled", blocked


async def test_a_general_childs_edit_asks_through_the_parent_session(tmp_path: Path) -> None:
    steps: list[dict[str, Any]] = [
        {"tool_calls": [_task("t1", "write it", agent="general")]},
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "new.txt", "content": "hello\n"}, "id": "w"}]},
        {"text": "Wrote new.txt."},
        {"text": "done"},
    ]
    model = write_script(tmp_path / "script.json", steps)
    async with run_editor(tmp_path, model, EditorClient(["allow_once"]), env=ENV) as editor:
        session = (await editor.new_session()).session_id  # default mode: a write asks
        assert (await editor.prompt(session, "go")).stop_reason == "end_turn"
        (asked,) = editor.client.permissions()
        assert asked["sessionId"] == session
        assert asked["toolCall"]["toolCallId"] == "w"
    assert (editor.project / "new.txt").read_text() == "hello\n"
    (result,) = tool_results(read_log(tmp_path, session), "t1")
    assert _text(result) == "Wrote new.txt." and not result["is_error"]


async def test_a_child_cannot_start_a_task_of_its_own(tmp_path: Path) -> None:
    steps: list[dict[str, Any]] = [
        {"tool_calls": [_task("t1", "delegate", agent="general")]},
        {"tool_calls": [_task("t2", "deeper", agent="general")]},
        {"text": "I had to do it myself."},
        {"text": "done"},
    ]
    model = write_script(tmp_path / "script.json", steps)
    async with run_editor(tmp_path, model, EditorClient([]), env=ENV) as editor:
        session = (await editor.new_session()).session_id
        await editor.conn.set_session_mode(session_id=session, mode_id="bypass")
        assert (await editor.prompt(session, "go")).stop_reason == "end_turn"
    children = _children(tmp_path)
    assert list(children) == ["t1"]  # no grandchild session was made
    (refused,) = tool_results(read_log(tmp_path, children["t1"]["id"]), "t2")
    assert refused["is_error"] and "depth limit" in _text(refused)


async def test_after_a_restart_load_replays_the_task_card_and_children_stay_hidden(tmp_path: Path) -> None:
    steps: list[dict[str, Any]] = [
        {"tool_calls": [_task("t1", "look")]},
        call("grep", "g", pattern="nothing-matches-this"),
        {"text": "Nothing found."},
        {"text": "done"},
    ]
    model = write_script(tmp_path / "script.json", steps)
    async with run_editor(tmp_path, model, EditorClient([]), env=ENV) as editor:
        session = (await editor.new_session()).session_id
        assert (await editor.prompt(session, "go")).stop_reason == "end_turn"
        live = [u for u in editor.tool_updates(session, "t1")]
    async with run_editor(tmp_path, model, EditorClient([]), env=ENV, name="second") as editor:
        listed = await editor.conn.list_sessions()
        assert [info.session_id for info in listed.sessions] == [session]
        await editor.load_session(session)
        replayed = editor.tool_updates(session, "t1")
        assert replayed[0]["sessionUpdate"] == "tool_call" and replayed[0]["title"] == "explore: job t1"
        assert any(u.get("status") == "in_progress" and "grep" in text_of(u) for u in replayed)
        final = editor.final(session, "t1")
        assert final["status"] == "completed" and text_of(final) == "Nothing found."
        assert [u.get("content") for u in replayed] == [u.get("content") for u in live]
    (child,) = _children(tmp_path).values()
    shown = {}
    for flags in ((), ("--all",)):
        with anyio.fail_after(30):
            done = await anyio.run_process(
                [sys.executable, "-m", "dsh", "sessions", "list", *flags],
                env=sandbox_env(tmp_path, model),
                check=False,
            )
        assert done.returncode == 0, done.stderr.decode()
        shown[flags] = done.stdout.decode()
    assert session in shown[()] and child["id"] not in shown[()]
    assert "1 sub-agent session hidden; --all shows it" in shown[()]
    assert session in shown[("--all",)] and child["id"] in shown[("--all",)]
    with anyio.fail_after(30):
        done = await anyio.run_process(
            [sys.executable, "-m", "dsh", "sessions", "show", session], env=sandbox_env(tmp_path, model), check=False
        )
    assert done.returncode == 0, done.stderr.decode()
    assert f"Sub-agents:\n  {child['id']}  (call t1)  look\n" in done.stdout.decode(), done.stdout.decode()


async def test_closing_the_parent_disposes_its_running_child(tmp_path: Path) -> None:
    steps: list[dict[str, Any]] = [
        {"tool_calls": [_task("t1", "work", agent="general")]},
        call("block", "k"),
    ]
    model = write_script(tmp_path / "script.json", steps)
    async with run_editor(tmp_path, model, EditorClient([]), env=ENV) as editor:
        session = (await editor.new_session()).session_id
        await editor.conn.set_session_mode(session_id=session, mode_id="bypass")
        async with anyio.create_task_group() as group:
            answer: list[Any] = []

            async def prompt() -> None:
                answer.append(await editor.prompt(session, "go"))

            group.start_soon(prompt)
            await editor.wait(
                lambda: any(
                    u.get("status") == "in_progress" and u.get("content") for u in editor.tool_updates(session, "t1")
                )
            )
            with anyio.fail_after(5):
                await editor.conn.close_session(session_id=session)
            # read while the daemon still runs: the child ended with the close, not with the daemon's exit
            (header,) = _children(tmp_path).values()
            child = read_log(tmp_path, header["id"])
            assert child[-1]["type"] == "turn/end", child[-1]
            assert child[-1]["data"]["reason"]["kind"] in ("aborted", "disposed"), child[-1]
        assert answer[0].stop_reason == "cancelled"


REVIEWER = """---
description: Reviews a change for bugs and says what to fix.
tools: [read_file, grep]
model: openai:reviewer-model
---
You are REVIEWER-7: read the diff, report bugs only.
"""


async def test_a_user_defined_agent_runs_on_its_model_with_its_instructions_and_tools(tmp_path: Path) -> None:
    from tests.support.provider_server import Reply, serve
    from tests.support.provider_wire import oa_text_reply

    project = tmp_path / "project"
    (project / ".dsh" / "agents").mkdir(parents=True)
    (project / ".dsh" / "agents" / "reviewer.md").write_text(REVIEWER)
    steps: list[dict[str, Any]] = [
        {"tool_calls": [_task("t1", "review src/", agent="reviewer")]},
        {"text": "done"},
    ]
    model = write_script(tmp_path / "script.json", steps)
    with serve() as server:
        server.script(Reply(events=oa_text_reply("No bugs found.")))
        env = ENV | {"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "test"}
        async with run_editor(tmp_path, model, EditorClient([]), project=project, env=env) as editor:
            session = (await editor.new_session()).session_id
            assert (await editor.prompt(session, "go")).stop_reason == "end_turn"
        (request,) = server.requests
    body = request.body
    assert body["model"] == "reviewer-model"
    system = body["messages"][0]
    assert system["role"] == "system" and "You are REVIEWER-7: read the diff, report bugs only." in system["content"]
    assert sorted(tool["function"]["name"] for tool in body["tools"]) == ["grep", "read_file"]
    (result,) = tool_results(read_log(tmp_path, session), "t1")
    assert _text(result) == "No bugs found." and not result["is_error"]


async def test_the_task_tool_lists_the_sessions_agent_types(tmp_path: Path) -> None:
    from tests.support.provider_server import Reply, serve
    from tests.support.provider_wire import oa_text_reply

    project = tmp_path / "project"
    (project / ".dsh" / "agents").mkdir(parents=True)
    (project / ".dsh" / "agents" / "reviewer.md").write_text(REVIEWER)
    (project / ".dsh" / "agents" / "broken.md").write_text("---\ntools: 3\n---\nno description\n")
    with serve() as server:
        server.script(Reply(events=oa_text_reply("hi")))
        env = ENV | {"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "test"}
        async with run_editor(tmp_path, "openai:main-model", EditorClient([]), project=project, env=env) as editor:
            session = (await editor.new_session()).session_id
            assert (await editor.prompt(session, "go")).stop_reason == "end_turn"
        (request,) = server.requests
    (task,) = [tool["function"] for tool in request.body["tools"] if tool["function"]["name"] == "task"]
    listed = [line for line in task["description"].splitlines() if line.startswith("- ")]
    assert [line.split(":")[0] for line in listed] == ["- explore", "- general", "- reviewer"]
    assert "- reviewer: Reviews a change for bugs and says what to fix." in listed


async def test_subagent_model_from_the_config_file_runs_the_children(tmp_path: Path) -> None:
    from tests.support.provider_server import Reply, serve
    from tests.support.provider_wire import oa_text_reply

    config = tmp_path / "home" / ".config" / "dsh"
    config.mkdir(parents=True)
    (config / "config.yaml").write_text("subagent_model: openai:cheap-model\n")
    steps: list[dict[str, Any]] = [{"tool_calls": [_task("t1", "look")]}, {"text": "done"}]
    model = write_script(tmp_path / "script.json", steps)
    with serve() as server:
        server.script(Reply(events=oa_text_reply("Found it.")))
        env = ENV | {"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "test"}
        async with run_editor(tmp_path, model, EditorClient([]), env=env) as editor:
            session = (await editor.new_session()).session_id
            assert (await editor.prompt(session, "go")).stop_reason == "end_turn"
        (request,) = server.requests
    assert request.body["model"] == "cheap-model"
    (result,) = tool_results(read_log(tmp_path, session), "t1")
    assert _text(result) == "Found it."


async def test_a_childs_cost_is_added_to_the_parents(tmp_path: Path) -> None:
    from tests.support.provider_server import Reply, serve
    from tests.support.provider_wire import DONE, oa_finish, oa_text_reply, oa_tool_delta

    config = tmp_path / "home" / ".config" / "dsh"
    config.mkdir(parents=True)
    (config / "config.yaml").write_text(
        "subagent_model: openai:cheap\n"
        "providers:\n  openai:\n    context_windows: {main: 100000}\n"
        "    prices: {cheap: {input: 1000000, output: 2000000}}\n"
    )
    arguments = '{"description": "look", "prompt": "look around"}'
    task_call = [oa_tool_delta(0, arguments, call_id="t1", name="task"), oa_finish("tool_calls"), DONE]
    with serve() as server:
        server.script(
            Reply(events=task_call),
            Reply(events=oa_text_reply("Found it.", prompt=7, completion=3)),  # the child: 7 in, 3 out = $13
            Reply(events=oa_text_reply("done")),
        )
        env = ENV | {"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "test"}
        async with run_editor(tmp_path, "openai:main", EditorClient([]), env=env) as editor:
            session = (await editor.new_session()).session_id
            assert (await editor.prompt(session, "go")).stop_reason == "end_turn"
            usages = [u for u in editor.updates(session) if u.get("sessionUpdate") == "usage_update"]
        assert [request.body["model"] for request in server.requests] == ["main", "cheap", "main"]
    # main is not priced: without the child's usage the parent would have no cost at all
    assert usages[-1]["cost"] == {"amount": 13.0, "currency": "USD"}, usages
