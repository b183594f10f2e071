"""Issue #29 item 5: cards right in every client.

A command that ran in the client's terminal is replayed by ``session/load`` with its output embedded as text
content, not as a ``terminal`` block naming a terminal an earlier process created and released (a second daemon
loads the session: its client never saw that terminal). The MCP annotation → kind mapping is tested with the
MCP plugin's units (``tests/mcp/test_mcp_units.py``) and end to end here, with a server whose tools carry the
reference filesystem server's annotations.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.editor import EditorClient, FakeTerminal, call, run_editor, text_of, write_script
from tests.support.env import approved_commands_unconfined, sandbox_env


async def test_a_client_terminal_command_is_replayed_with_its_output_embedded(tmp_path: Path) -> None:
    model = write_script(tmp_path / "script.json", [call("run_command", "c1", command="make test"), {"text": "done"}])
    terminal = FakeTerminal(output="hi from the editor\n", exit_code=0)
    unconfined = approved_commands_unconfined(sandbox_env(tmp_path, model))  # approved commands may go to the editor
    async with run_editor(
        tmp_path, model, EditorClient(["allow_once"], terminal=terminal), terminal=True, env=unconfined
    ) as first:
        session = (await first.new_session()).session_id
        assert (await first.prompt(session, "test it")).stop_reason == "end_turn"
        live = first.final(session, "c1")
    assert {"type": "terminal", "terminalId": "term-1"} in live["content"]  # live: the editor's own terminal

    async with run_editor(tmp_path, model, EditorClient([]), terminal=True, name="second", env=unconfined) as second:
        await second.load_session(session)
        replayed = second.tool_updates(session, "c1")
        final = second.final(session, "c1")
    assert replayed[0]["sessionUpdate"] == "tool_call" and replayed[0]["kind"] == "execute"
    assert not [c for u in replayed for c in u.get("content") or [] if c.get("type") == "terminal"], replayed
    assert final["status"] == "completed"
    assert text_of(final) == "hi from the editor\n[exit code: 0]"  # the output, embedded


async def test_filesystem_style_mcp_tools_get_edit_and_move_cards_never_delete(tmp_path: Path) -> None:
    """The reference filesystem server annotates ``write_file`` ``destructiveHint`` (it may overwrite): its card
    and its permission request say ``edit``; ``move_file`` is ``move``; the read-only tool asks nothing."""
    from acp.schema import HttpMcpServer

    from tests.support.editor import DEADLINE
    from tests.support.mcp_servers import serve_http

    calls = {
        "tool_calls": [
            {"name": "mcp__files__read_text_file", "id": "r1", "arguments": {"path": "a.txt"}},
            {"name": "mcp__files__write_file", "id": "w1", "arguments": {"path": "a.txt", "content": "hi"}},
            {"name": "mcp__files__move_file", "id": "m1", "arguments": {"source": "a.txt", "destination": "b.txt"}},
        ]
    }
    model = write_script(tmp_path / "script.json", [calls, {"text": "done"}])
    client = EditorClient(["allow_once", "allow_once"])
    with serve_http(filesystem_tools=True) as url:
        async with run_editor(tmp_path, model, client, env={"DSH_MCP_TIMEOUT": "30"}) as editor:
            import anyio

            with anyio.fail_after(DEADLINE):
                response = await editor.conn.new_session(
                    cwd=str(editor.project), mcp_servers=[HttpMcpServer(type="http", name="files", url=url, headers=[])]
                )
            session = response.session_id
            assert (await editor.prompt(session, "write it")).stop_reason == "end_turn"
            cards = {call: editor.tool_updates(session, call)[0] for call in ("r1", "w1", "m1")}
            asked = {p["toolCall"]["toolCallId"]: p["toolCall"] for p in client.permissions()}
    assert {call: card["kind"] for call, card in cards.items()} == {"r1": "read", "w1": "edit", "m1": "move"}
    assert set(asked) == {"w1", "m1"}  # the read-only tool asks nothing
    assert {call: card.get("kind") for call, card in asked.items()} == {"w1": "edit", "m1": "move"}
