"""Disposing an agent while a tool ignores its cancel token closes the turn as ``disposed`` (issue #10, item 5c;
RFC 0002): after the stop grace, a synthetic error ``tool/result`` for the stuck call, ``step/end`` and ``turn/end
{kind: disposed}`` are written (and flushed) before the loop's task is cancelled, so the file is balanced and the
next load does not call the turn ``interrupted``. The prompt is answered ``cancelled`` and its card ends ``failed``.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest
from acp import text_block

from tests.support.durable import WAIT, read_session, run_daemon
from tests.support.editor import call
from tests.support.env import write_script

PLUGIN = "tests.containment.misbehaving_plugins:stubborn"


@pytest.mark.parametrize("how", ["close", "delete", "shutdown"])
async def test_a_stubborn_tool_at_dispose_ends_the_turn_disposed(tmp_path: Path, how: str) -> None:
    fifo = tmp_path / "started.fifo"
    os.mkfifo(fifo)
    model = write_script(tmp_path / "script.json", [call("stubborn", "s1", fifo=str(fifo)), {"text": "never"}])
    data = tmp_path / "data"
    answers: list[str] = []
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        async with run_daemon(tmp_path, data, model=model, plugins=[PLUGIN], allow_errors=True) as daemon:
            session = await daemon.start()
            await daemon.conn.set_session_mode(session_id=session, mode_id="bypass")
            with anyio.fail_after(WAIT):
                async with anyio.create_task_group() as group:

                    async def prompt() -> None:
                        response = await daemon.conn.prompt(session_id=session, prompt=[text_block("go")])
                        answers.append(response.stop_reason)

                    group.start_soon(prompt)
                    await anyio.wait_readable(reader)
                    assert os.read(reader, 100) == b"started\n"
                    if how == "close":
                        await daemon.close_session(session)
                    elif how == "delete":
                        await daemon.request("session/delete", {"sessionId": session})
                    else:
                        assert await daemon.close_stdin() == 0
            assert answers == ["cancelled"]
            await daemon.client.settled()
            finals = [
                u
                for s, u in daemon.client.updates
                if s == session and u.get("toolCallId") == "s1" and u.get("status") in ("completed", "failed")
            ]
            assert [u["status"] for u in finals][-1:] == ["failed"]
    finally:
        os.close(reader)
    if how == "delete":
        return  # the file is gone by design; close and shutdown keep it
    _header, events = read_session(data, session)
    tail = [(e["type"], e["data"].get("reason", {}).get("kind")) for e in events[-3:]]
    assert tail == [("tool/result", None), ("step/end", None), ("turn/end", "disposed")], events[-4:]
    result = events[-3]["data"]
    assert result["call_id"] == "s1" and result["is_error"] is True
    assert result["error"]["code"] == "disposed"
