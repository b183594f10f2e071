"""An exception in a plugin's ``session/event`` listener makes a failed turn (issue #10, item 5b; RFC 0003): the
prompt is answered -32603 ``turn failed: …`` (not ``cancelled``), the log holds exactly one ``error`` event and a
balanced turn, and every other listener (the front end, persistence) still saw every event.

The listener raises on every ``user/message``; it is registered ahead of every other listener (the case that hid
the prompt's message from the front end, which then answered the prompt ``cancelled``) or after them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import RequestError

from tests.support.durable import read_session, request_error, run_daemon

PLUGINS = "tests.containment.misbehaving_plugins"


@pytest.mark.parametrize("where", ["throw_first", "throw_last"])
async def test_a_throwing_session_event_listener_fails_the_turn(tmp_path: Path, where: str) -> None:
    data = tmp_path / "data"
    async with run_daemon(tmp_path, data, plugins=[f"{PLUGINS}:{where}"], allow_errors=True) as daemon:
        session = await daemon.start()
        with pytest.raises(RequestError) as caught:
            await daemon.prompt(session, "hello")
        error = request_error(caught)
        assert error.code == -32603
        assert "the misbehaving listener broke" in str(error.data or error)
    _header, events = read_session(data, session)
    kinds = [e["type"] for e in events]
    assert kinds == ["turn/start", "user/message", "error", "turn/end"], kinds
    (end,) = [e for e in events if e["type"] == "turn/end"]
    assert end["data"]["reason"]["kind"] == "error"
    assert "the misbehaving listener broke" in end["data"]["reason"]["message"]
