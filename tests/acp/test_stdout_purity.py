"""Stdout purity: whatever a plugin, a tool, a library or a child process writes, only frames reach stdout.

The daemon runs with ``tests/acp/noisy_plugin.py`` loaded through ``DSH_PLUGINS``. Every stdout line is checked
as it is read (:func:`tests.support.raw.check_frame`), stdout is read to its end, and the noise must be found on
stderr instead (so the test cannot pass by the noise simply never being made).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from tests.acp.noisy_plugin import CHANNELS, SETUP_CHANNELS
from tests.support.raw import WAIT, spawn_daemon, write_script

PLUGIN = "noisy_plugin:plugin"


def _updates(messages: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [
        m["params"]["update"]
        for m in messages
        if m.get("method") == "session/update" and m["params"]["update"].get("sessionUpdate") == kind
    ]


async def test_a_noisy_tool_writes_nothing_but_frames_to_stdout(tmp_path: Path) -> None:
    model = write_script(
        tmp_path,
        [
            {"text": "Making noise.", "tool_calls": [{"name": "noisy", "arguments": {}, "id": "call_noisy"}]},
            {"text": "done after the noise"},
        ],
    )
    stderr = tmp_path / "stderr.log"
    async with spawn_daemon(model=model, plugins=PLUGIN, stderr_path=stderr) as daemon:
        with anyio.fail_after(WAIT):
            await daemon.initialize()
            session_id = await daemon.new_session(str(tmp_path))
            response, _ = await daemon.prompt(session_id, "make some noise")
            assert response["result"] == {"stopReason": "end_turn"}, response
            await daemon.close_stdin()
            await daemon.read_until_eof()
            code, _ = await daemon.wait_exit()
        assert code == 0

        messages = daemon.messages
        assert all(m["jsonrpc"] == "2.0" for m in messages)
        calls = _updates(messages, "tool_call")
        assert [(c["toolCallId"], c["title"], c["status"]) for c in calls] == [("call_noisy", "noisy", "pending")]
        finals = [u for u in _updates(messages, "tool_call_update") if u["toolCallId"] == "call_noisy"]
        assert [u["status"] for u in finals] == ["in_progress", "completed"]  # issue #11: in_progress when it runs
        assert finals[1]["content"] == [{"type": "content", "content": {"type": "text", "text": "made some noise"}}]
        text = "".join(u["content"]["text"] for u in _updates(messages, "agent_message_chunk"))
        assert text == "Making noise.done after the noise"

        # The noise was made, and it went to stderr: every channel, including the child process.
        log = daemon.stderr_text()
        missing = [channel for channel in (*CHANNELS, *SETUP_CHANNELS) if channel not in log]
        assert missing == [], f"not on stderr: {missing}\n--- stderr ---\n{log[-3000:]}"
        # And none of it is on stdout, not even inside a frame.
        assert not [c for c in (*CHANNELS, *SETUP_CHANNELS) for line in daemon.lines if c.encode() in line]


async def test_a_plugin_noisy_at_import_and_apply_time_keeps_stdout_clean(tmp_path: Path) -> None:
    stderr = tmp_path / "stderr.log"
    async with spawn_daemon(plugins=PLUGIN, stderr_path=stderr) as daemon:
        with anyio.fail_after(WAIT):
            # The very first line on stdout is the answer to initialize: nothing printed before it.
            await daemon.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}})
            first = await daemon.read()
            assert first["id"] == 0 and first["result"]["protocolVersion"] == 1
            session_id = await daemon.new_session(str(tmp_path))
            response, _ = await daemon.prompt(session_id, "quiet please")
            assert response["result"] == {"stopReason": "end_turn"}
            await daemon.close_stdin()
            await daemon.read_until_eof()
            code, _ = await daemon.wait_exit()
        assert code == 0
        log = daemon.stderr_text()
        missing = [channel for channel in SETUP_CHANNELS if channel not in log]
        assert missing == [], f"not on stderr: {missing}\n--- stderr ---\n{log[-3000:]}"
        assert not [c for c in SETUP_CHANNELS for line in daemon.lines if c.encode() in line]
