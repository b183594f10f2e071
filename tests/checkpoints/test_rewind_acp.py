"""``delete_file``, checkpoints and ``/rewind`` over the wire (issue 25): a real daemon, the SDK client as the
editor, a loopback OpenAI-compatible provider that plays the model and records what the model is sent."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from tests.support.editor import Editor, EditorClient, read_log, run_editor
from tests.support.provider_server import FakeProvider, Reply
from tests.support.provider_wire import DONE, oa_chunk, oa_finish, oa_text_reply, oa_tool_delta, oa_usage

MODEL = "openai:test-model"
C_TEXT = "#!/bin/sh\necho c\n"


def env_of(server: FakeProvider) -> dict[str, str]:
    return {"OPENAI_BASE_URL": f"{server.url}/v1", "OPENAI_API_KEY": "test"}


def tool(call_id: str, name: str, **arguments: Any) -> Reply:
    """A model step calling one tool."""
    return Reply(
        events=[
            oa_chunk({"role": "assistant", "content": ""}),
            oa_tool_delta(0, json.dumps(arguments), call_id, name),
            oa_finish("tool_calls"),
            oa_usage(7, 3),
            DONE,
        ]
    )


def text(words: str) -> Reply:
    return Reply(events=oa_text_reply(words))


def said(editor: Editor, session: str, since: int) -> str:
    """The agent's message text in the session's updates from index *since* on."""
    updates = editor.updates(session)[since:]
    return "".join(u["content"].get("text", "") for u in updates if u.get("sessionUpdate") == "agent_message_chunk")


def user_texts(body: dict[str, Any]) -> list[str]:
    """The user's own words in a request to the model (tool results and system text left out)."""
    found = []
    for message in body["messages"]:
        if message["role"] != "user":
            continue
        content = message["content"]
        parts = (
            [content] if isinstance(content, str) else [p.get("text", "") for p in content if p.get("type") == "text"]
        )
        found.extend(p for p in parts if p.startswith("turn "))
    return found


def three_turns(server: FakeProvider) -> None:
    server.script(
        tool("r1", "read_file", path="a.py"),
        tool("e1", "edit_file", path="a.py", old_string="v0", new_string="v1"),
        text("one done"),
        tool("w2", "write_file", path="b.py", content="new b\n"),
        tool("e2", "edit_file", path="a.py", old_string="v1", new_string="v2"),
        text("two done"),
        tool("d3", "delete_file", path="c.py"),
        text("three done"),
    )


def setup_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.py").write_text("a = 'v0'\n")
    (project / "c.py").write_text(C_TEXT)
    (project / "c.py").chmod(0o755)
    return project


async def run_three(editor: Editor) -> str:
    session = (await editor.new_session()).session_id
    for words in ("turn one: edit a", "turn two: create b", "turn three: delete c"):
        assert (await editor.prompt(session, words)).stop_reason == "end_turn"
    return session


async def test_rewind_restores_files_and_truncates_the_conversation_live_and_after_load(
    server: FakeProvider, tmp_path: Path
) -> None:
    project = setup_project(tmp_path)
    three_turns(server)
    client = EditorClient(["allow_once"] * 4)
    async with run_editor(tmp_path, MODEL, client, env=env_of(server)) as editor:
        session = await run_three(editor)
        assert (project / "a.py").read_text() == "a = 'v2'\n"
        assert (project / "b.py").read_text() == "new b\n"
        assert not (project / "c.py").exists()
        # delete_file asked in default mode, and its card showed what is removed.
        asked = client.permissions()[-1]["toolCall"]
        assert asked["toolCallId"] == "d3" and asked["kind"] == "delete"
        (diff,) = [c for c in asked["content"] if c["type"] == "diff"]
        assert diff["oldText"] == C_TEXT and diff["newText"] == "" and diff["path"] == str(project / "c.py")

        mark = len(editor.updates(session))
        assert (await editor.prompt(session, "/rewind")).stop_reason == "end_turn"
        listing = said(editor, session, mark)
        assert "1. turn one: edit a — " + str(project / "a.py") in listing
        assert "2. turn two: create b — " + f"{project / 'a.py'}, {project / 'b.py'}" in listing
        assert "3. turn three: delete c — " + str(project / "c.py") in listing
        assert "not restored" in listing

        mark = len(editor.updates(session))
        assert (await editor.prompt(session, "/rewind 2")).stop_reason == "end_turn"
        assert "Rewound to before turn 2" in said(editor, session, mark)
        assert (project / "a.py").read_text() == "a = 'v1'\n"
        assert not (project / "b.py").exists()
        assert (project / "c.py").read_text() == C_TEXT
        assert stat.S_IMODE(os.stat(project / "c.py").st_mode) == 0o755

        server.script(text("after rewind"))
        assert (await editor.prompt(session, "turn four")).stop_reason == "end_turn"
        live = server.requests[-1].body
        assert user_texts(live) == ["turn one: edit a", "turn four"]
    events = read_log(tmp_path, session)
    assert [e["type"] for e in events].count("context/rewind") == 1  # the log keeps everything
    assert any(
        e["type"] == "user/message" and e["data"]["content"][0]["text"] == "turn three: delete c" for e in events
    )

    server.script(text("after load"))
    async with run_editor(tmp_path, MODEL, EditorClient(), env=env_of(server), project=project) as editor:
        await editor.load_session(session)
        replayed = [
            u["content"]["text"] for u in editor.updates(session) if u.get("sessionUpdate") == "user_message_chunk"
        ]
        assert [t for t in replayed if t.startswith("turn ")] == ["turn one: edit a", "turn four"]
        assert (await editor.prompt(session, "turn five")).stop_reason == "end_turn"
    loaded = server.requests[-1].body
    assert user_texts(loaded) == ["turn one: edit a", "turn four", "turn five"]
    assert loaded["messages"][: len(live["messages"])] == live["messages"]


async def test_a_file_changed_by_hand_is_named_and_left_alone_unless_forced(
    server: FakeProvider, tmp_path: Path
) -> None:
    project = setup_project(tmp_path)
    three_turns(server)
    async with run_editor(tmp_path, MODEL, EditorClient(["allow_once"] * 4), env=env_of(server)) as editor:
        session = await run_three(editor)
        (project / "b.py").write_text("mine\n")  # by hand, after turn 2

        mark = len(editor.updates(session))
        assert (await editor.prompt(session, "/rewind 2")).stop_reason == "end_turn"
        refusal = said(editor, session, mark)
        assert "Nothing was rewound" in refusal and str(project / "b.py") in refusal
        assert str(project / "a.py") not in refusal  # only the file changed by hand is named
        assert "/rewind 2 --force" in refusal
        assert (project / "b.py").read_text() == "mine\n"
        assert (project / "a.py").read_text() == "a = 'v2'\n"  # all or nothing: no file was restored
        assert not (project / "c.py").exists()

        server.script(text("still all there"))
        assert (await editor.prompt(session, "turn four")).stop_reason == "end_turn"
        assert "turn three: delete c" in user_texts(server.requests[-1].body)

        mark = len(editor.updates(session))
        assert (await editor.prompt(session, "/rewind 2 --force")).stop_reason == "end_turn"
        assert "Rewound to before turn 2" in said(editor, session, mark)
        assert not (project / "b.py").exists()
        assert (project / "a.py").read_text() == "a = 'v1'\n"
        assert (project / "c.py").read_text() == C_TEXT


async def test_with_an_editor_that_serves_files_the_restore_goes_through_fs_write_text_file(
    server: FakeProvider, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    path = str(project / "a.py")
    (project / "a.py").write_text("a = 'v0'\n")  # the disk; the editor's buffer is what the tools see
    server.script(
        tool("r1", "read_file", path="a.py"),
        tool("e1", "edit_file", path="a.py", old_string="v0", new_string="v1"),
        text("one done"),
    )
    client = EditorClient(["allow_once"], buffers={path: "a = 'v0'\n"})
    async with run_editor(tmp_path, MODEL, client, env=env_of(server), fs=True) as editor:
        session = (await editor.new_session()).session_id
        assert (await editor.prompt(session, "turn one")).stop_reason == "end_turn"
        assert client.buffers[path] == "a = 'v1'\n"
        writes = len(client.of_method("fs/write_text_file"))
        assert (await editor.prompt(session, "/rewind 1")).stop_reason == "end_turn"
        restores = client.of_method("fs/write_text_file")[writes:]
        assert restores == [{"sessionId": session, "path": path, "content": "a = 'v0'\n"}]
        assert client.buffers[path] == "a = 'v0'\n"
