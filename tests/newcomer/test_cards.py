"""Issue #29 item 5: cards right in every client.

A command that ran in the client's terminal is replayed by ``session/load`` with its output embedded as text
content, not as a ``terminal`` block naming a terminal an earlier process created and released (a second daemon
loads the session: its client never saw that terminal). The MCP annotation → kind mapping is tested with the
MCP plugin's units (``tests/mcp/test_mcp_units.py``).
"""

from __future__ import annotations

from pathlib import Path

from tests.support.editor import EditorClient, FakeTerminal, call, run_editor, text_of, write_script


async def test_a_client_terminal_command_is_replayed_with_its_output_embedded(tmp_path: Path) -> None:
    model = write_script(tmp_path / "script.json", [call("run_command", "c1", command="make test"), {"text": "done"}])
    terminal = FakeTerminal(output="hi from the editor\n", exit_code=0)
    async with run_editor(tmp_path, model, EditorClient(["allow_once"], terminal=terminal), terminal=True) as first:
        session = (await first.new_session()).session_id
        assert (await first.prompt(session, "test it")).stop_reason == "end_turn"
        live = first.final(session, "c1")
    assert {"type": "terminal", "terminalId": "term-1"} in live["content"]  # live: the editor's own terminal

    async with run_editor(tmp_path, model, EditorClient([]), terminal=True, name="second") as second:
        await second.load_session(session)
        replayed = second.tool_updates(session, "c1")
        final = second.final(session, "c1")
    assert replayed[0]["sessionUpdate"] == "tool_call" and replayed[0]["kind"] == "execute"
    assert not [c for u in replayed for c in u.get("content") or [] if c.get("type") == "terminal"], replayed
    assert final["status"] == "completed"
    assert text_of(final) == "hi from the editor\n[exit code: 0]"  # the output, embedded
